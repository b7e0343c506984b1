// In charge of one MCP tool call: the saved query or ad-hoc statement it names run through the very
// stages /q/ and /execute_sql use (call/statement.ts: governance, masks, limits, history with transport
// "mcp"), rows capped at QUERYAPIGATE_MCP_MAX_ROWS with the cut said in the result, and refusals as
// tool errors ({error, code}) rather than protocol errors, so an agent can read and correct them.
import type { Caller } from '../auth/keys.js';
import { adhocCall, adhocRequest } from '../call/adhoc.js';
import { authorizeAdhoc, checkConnection } from '../call/authorize.js';
import type { CallContext } from '../call/context.js';
import { mayWrite } from '../call/govern.js';
import type { CallRequest } from '../call/request.js';
import { admit, savedCall } from '../call/runCall.js';
import type { CallOptions } from '../call/statement.js';
import { GatewayError } from '../contract/errors.js';
import { columnActions, type MaskAction } from '../governance/masking.js';
import { allowedKeys } from '../governance/policy.js';
import { type Answer, bodyText } from '../contract/exchange.js';
import { EXECUTE_SQL, hasConnectionGrant, LIST_TABLES, queryTools } from './tools.js';

export interface ToolResult {
  [key: string]: unknown;
  content: Array<{ type: 'text'; text: string }>;
  structuredContent: Record<string, unknown>;
  isError?: boolean;
}

/** What every result is: rows (or tables) and whether the list was cut, or an error and its code. */
export const OUTPUT_SCHEMA = {
  type: 'object',
  properties: {
    rows: { type: 'array', items: { type: 'object' } },
    tables: { type: 'array', items: { type: 'object' } },
    truncated: { type: 'boolean' },
    error: { type: 'string' },
    code: { type: 'string' },
    retry_after: { type: 'number' },
  },
} as const;

export async function callTool(ctx: CallContext, caller: Caller, name: string, args: Record<string, unknown>, requestId: string): Promise<ToolResult> {
  try {
    const cap = ctx.config.mcpMaxRows;
    const options = (readOnly: boolean, rowCap = cap): CallOptions => ({ transport: 'mcp', readOnly, requestId, ifNoneMatch: '', rowCap });
    if ((name === LIST_TABLES || name === EXECUTE_SQL) && hasConnectionGrant(caller)) {
      const refused = await admitted(ctx, caller, '', requestId);
      if (refused) return fromAnswer(refused, cap);
      if (name === LIST_TABLES) return await listTables(ctx, caller, args);
      const { page_size: size, ...body } = args;
      if (size !== undefined && (!Number.isSafeInteger(size) || (size as number) < 1))
        throw new GatewayError('invalid_paging', 'page_size must be a positive integer');
      const rowCap = Math.min(cap, (size as number | undefined) ?? cap);
      const call = adhocRequest(body, new Map());
      return fromAnswer(await adhocCall(ctx, caller, call, options(!mayWrite(caller, null, ctx.config.allowWrites), rowCap)), rowCap);
    }
    const query = (await queryTools(ctx, caller)).get(name);
    if (!query) throw new GatewayError('not_found', `No tool '${name}' for this key`);
    const refused = await admitted(ctx, caller, query.name, requestId);
    if (refused) return fromAnswer(refused, cap);
    const call: CallRequest = {
      name: query.name,
      version: null,
      connectionName: null,
      format: 'json',
      page: null,
      pageSize: null,
      timeout: null,
      params: new Map(Object.entries(args)),
      typed: true,
      stream: false,
    };
    const fresh = await ctx.meta.query(query.name); // the row calls read, as /q/ does
    return fromAnswer(await savedCall(ctx, caller, fresh, call, options(!mayWrite(caller, query.name, ctx.config.allowWrites))), cap);
  } catch (e) {
    if (e instanceof GatewayError) return toolError(e.message, e.code, e.extras?.retry_after);
    throw e;
  }
}

/** The key's own rate limits, counted per tool call as per /q/ call; the refusal when over them. */
async function admitted(ctx: CallContext, caller: Caller, limitName: string, requestId: string): Promise<Answer | null> {
  return (await admit(ctx, caller, limitName, requestId)).refused;
}

/** A call's answer as a tool result: its rows (X-Has-More says whether the cap cut them), or its error. */
function fromAnswer(answer: Answer, cap: number): ToolResult {
  const body = JSON.parse(bodyText(answer)) as unknown; // MCP calls answer JSON
  if (answer.status !== 200) {
    const e = body as { error: string; code: string; retry_after?: number; detail?: string };
    return toolError(e.detail ? `${e.error}: ${e.detail}` : e.error, e.code, e.retry_after);
  }
  const rows = Array.isArray(body) ? body : []; // {"message": "No results returned"}
  const more = answer.headers.indexOf('X-Has-More');
  const truncated = more !== -1 && answer.headers[more + 1] === 'true';
  const text = JSON.stringify(rows) + (truncated ? `\n(Only the first ${cap} rows are shown; the result has more.)` : '');
  return { content: [{ type: 'text', text }], structuredContent: { rows, truncated } };
}

function toolError(message: string, code: string, retryAfter?: number): ToolResult {
  const structuredContent: Record<string, unknown> = { error: message, code };
  if (retryAfter !== undefined) structuredContent.retry_after = retryAfter;
  return { content: [{ type: 'text', text: `${message} (${code})` }], structuredContent, isError: true };
}

/** A connection's tables the key may read (its allowed_tables), with their columns and types. */
async function listTables(ctx: CallContext, caller: Caller, args: Record<string, unknown>): Promise<ToolResult> {
  const name = args.connection_name;
  if (typeof name !== 'string' || !name) throw new GatewayError('connection_required', 'Connection name is missing');
  authorizeAdhoc(caller, name);
  const connection = checkConnection(await ctx.meta.connection(name), name);
  const known = await ctx.governance.schemas.get(connection, ctx.source(connection));
  // Names resolved as governance resolves them: an allowed_tables entry is the relation the connection would read.
  const allowed = caller.kind === 'key' && caller.key.allowed_tables ? allowedKeys(caller.key.allowed_tables, known.schema) : null;
  const maskOf = caller.kind === 'key' && caller.key.mask?.length ? columnActions(caller.key.mask) : null;
  type Column = { name: string; type: string | null; masked?: MaskAction };
  const tables: Array<{ name: string; schema: string; columns: Column[] }> = [];
  for (const rel of known.schema.relations.values()) {
    if (!rel.columns || (allowed && !allowed.has(rel.key))) continue; // views carry no traceable columns
    const columns: Column[] = [];
    for (const [i, name] of rel.columns.entries()) {
      const masked = maskOf ? maskOf(rel.key, name) : null;
      if (masked === 'drop') continue; // a column the key's answers never hold is not listed either
      const type = rel.types[i] || null;
      columns.push(masked ? { name, type, masked } : { name, type });
    }
    tables.push({ name: rel.name, schema: rel.schema, columns });
  }
  const cap = ctx.config.mcpMaxRows;
  const truncated = tables.length > cap;
  if (truncated) tables.length = cap;
  const text = JSON.stringify(tables) + (truncated ? `\n(Only the first ${cap} tables are shown.)` : '');
  return { content: [{ type: 'text', text }], structuredContent: { tables, truncated } };
}
