// In charge of one MCP request over Streamable HTTP, in an executor: the caller identified by its
// X-API-Key, a stateless MCP server built for it (the SDK's Server on its web-standard transport, no
// session, JSON answers), the request handed over as a web Request and the Response handed back as an
// Answer. Nothing is kept between requests, so any executor of any instance can answer any of them.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { identify } from '../auth/identify.js';
import type { Caller } from '../auth/keys.js';
import type { CallContext } from '../call/context.js';
import { type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import { callTool, OUTPUT_SCHEMA } from './calls.js';
import { listTools, type McpTool } from './tools.js';

/** What the acceptor hands an executor (piscina task 'mcp'): the request as read, and the server's version. */
export interface McpTask {
  request: Request;
  serverVersion: string;
}

/** GET /api/v1/mcp/tools (piscina task 'mcpTools'): the tools this caller (an administrator) sees. */
export interface McpToolsTask {
  caller: Caller;
}

export type McpToolListing = Array<Pick<McpTool, 'name' | 'description' | 'kind' | 'params' | 'read_only'>>;

export async function serveMcp(ctx: CallContext, task: McpTask): Promise<Answer> {
  const req = task.request;
  ctx.catchUp(req.changes);
  const caller = await identify(ctx.meta, ctx.adminKey, req.apiKey, req, ctx.jwt, req.authorization);
  if (!caller) return errorAnswer('unauthorized', 'Unauthorized', req.requestId);
  const server = new Server({ name: 'queryapigate', version: task.serverVersion }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: (await listTools(ctx, caller)).map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: t.inputSchema,
      outputSchema: OUTPUT_SCHEMA,
      annotations: { readOnlyHint: t.read_only, openWorldHint: false },
    })),
  }));
  server.setRequestHandler(CallToolRequestSchema, (r) => callTool(ctx, caller, r.params.name, r.params.arguments ?? {}, req.requestId));
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  await server.connect(transport);
  try {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers ?? {})) if (v) headers.set(k, v);
    const res = await transport.handleRequest(
      new globalThis.Request('http://127.0.0.1/mcp', { method: req.method, headers, body: req.body ? Buffer.from(req.body) : null }),
    );
    const out: string[] = [];
    for (const [name, value] of res.headers) out.push(name, value);
    return { status: res.status, headers: out, body: await res.text(), key: caller.name };
  } finally {
    await server.close();
  }
}

export async function mcpTools(ctx: CallContext, task: McpToolsTask): Promise<McpToolListing> {
  return (await listTools(ctx, task.caller)).map(({ name, description, kind, params, read_only }) => ({ name, description, kind, params, read_only }));
}
