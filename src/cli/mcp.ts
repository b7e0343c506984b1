// In charge of `queryapigate mcp`: MCP over stdio for desktop agents, as a relay to a running server's
// /mcp: each JSON-RPC message read from stdin (the SDK's stdio framing) is POSTed with the key and the
// server's answer written to stdout. Tools, governance, limits and history are the server's own, so
// stdio and HTTP cannot differ; nothing but JSON-RPC ever goes to stdout.
// The server is stateless and cannot push, so the relay watches the tool list itself: every
// --watch-seconds it lists the tools (its own request, never forwarded) and, when the list differs
// from the one the client last read, sends notifications/tools/list_changed (and says it will, as
// the tools capability's listChanged, in the initialize result it relays).
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { commandConfig } from './settings.js';
import type { Command } from './tree.js';

/** How long one message may wait for the server (a tool call's query has its own, shorter, limit). */
const RELAY_TIMEOUT_MS = 120_000;
const DEFAULT_WATCH_SECONDS = 10;

export const MCP: Command = {
  kind: 'command',
  name: 'mcp',
  summary: "Serve MCP over stdio (for desktop agents), relayed to a running server's /mcp",
  usage: '[options]',
  description: [
    'Reads JSON-RPC messages on stdin and answers on stdout, through POST /mcp of a running server with the key:',
    'the tools are those the key may call there, governed and recorded (transport "mcp") by that server.',
    'The server is --url, else http://QUERYAPIGATE_HOST:QUERYAPIGATE_PORT; the key is --key, else',
    'QUERYAPIGATE_ADMIN_TOKEN, else QUERYAPIGATE_API_KEY. A key given with --key can be seen in the process list: prefer the variable.',
    'Diagnostics go to stderr only. Ends when stdin ends.',
  ],
  args: { min: 0, max: 0 },
  options: {
    url: { type: 'string', value: 'URL', help: 'the server (default: from QUERYAPIGATE_HOST and QUERYAPIGATE_PORT)' },
    key: {
      type: 'string',
      value: 'KEY',
      help: 'the administrator token or API key the tools run with (default: QUERYAPIGATE_ADMIN_TOKEN, else QUERYAPIGATE_API_KEY)',
    },
    'watch-seconds': { type: 'string', value: 'N', help: 'how often the tool list is checked for changes (default 10; 0: never)' },
  },
  examples: ['queryapigate mcp --url http://127.0.0.1:5000', 'QUERYAPIGATE_API_KEY=sk_... queryapigate mcp'],
  async run(inv) {
    const config = commandConfig(inv.say);
    const host = ['0.0.0.0', '::'].includes(config.host) ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
    const base = ((inv.values.url as string | undefined) ?? `http://${host}:${config.port}`).replace(/\/+$/, '');
    const key = (inv.values.key as string | undefined) ?? config.adminToken ?? config.adminKey ?? '';
    inv.say(`mcp: relaying stdio to ${base}/mcp${key ? '' : '; no key: neither --key, QUERYAPIGATE_ADMIN_TOKEN nor QUERYAPIGATE_API_KEY is set'}`);
    const watchSeconds = Number((inv.values['watch-seconds'] as string | undefined) ?? DEFAULT_WATCH_SECONDS);
    if (!Number.isFinite(watchSeconds) || watchSeconds < 0) throw new Error('--watch-seconds must be a number of seconds, 0 or more');

    // The SDK (and zod under it) is loaded by this command only: imported up front it sat in every
    // `serve` process's heap (about 5 MB live), since the command tree imports every command.
    const { StdioServerTransport } = await import('@modelcontextprotocol/sdk/server/stdio.js');
    const transport = new StdioServerTransport();
    let protocolVersion: string | null = null; // told to the server on every message after initialize
    const inFlight = new Set<Promise<void>>();
    const post = (message: JSONRPCMessage) => {
      const headers: Record<string, string> = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
      if (key) headers['X-API-Key'] = key;
      if (protocolVersion) headers['MCP-Protocol-Version'] = protocolVersion;
      return fetch(`${base}/mcp`, { method: 'POST', headers, body: JSON.stringify(message), signal: AbortSignal.timeout(RELAY_TIMEOUT_MS) });
    };
    /** The tool list the client last read, as text (null: not read yet), and the ids of its tools/list requests. */
    let seenTools: string | null = null;
    const listRequests = new Set<unknown>();
    let watch: NodeJS.Timeout | null = null;
    const checkTools = async () => {
      try {
        const res = await post({ jsonrpc: '2.0', id: `queryapigate-watch-${Date.now()}`, method: 'tools/list', params: {} });
        const reply = (await res.json()) as { result?: { tools?: unknown } };
        const now = reply.result?.tools === undefined ? null : JSON.stringify(reply.result.tools);
        if (now !== null && seenTools !== null && now !== seenTools) {
          seenTools = null; // told once; the client's next list is the new baseline
          await transport.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
        }
      } catch (e) {
        inv.say(`mcp: the tool list could not be checked: ${(e as Error).message}`);
      }
    };
    const relay = async (message: JSONRPCMessage) => {
      const id = 'id' in message ? message.id : undefined;
      if ('method' in message && message.method === 'tools/list' && id !== undefined) listRequests.add(id);
      if ('method' in message && message.method === 'notifications/initialized' && watchSeconds > 0 && !watch) {
        watch = setInterval(() => void checkTools(), watchSeconds * 1000);
      }
      const fail = (text: string, code?: string) =>
        id !== undefined && transport.send({ jsonrpc: '2.0', id, error: { code: -32000, message: text, data: code ? { code } : undefined } });
      let res: Response;
      try {
        res = await post(message);
      } catch (e) {
        await fail(`cannot reach the server at ${base}: ${((e as Error).cause as Error | undefined)?.message ?? (e as Error).message}`);
        return;
      }
      const text = await res.text();
      if (res.status === 202 || !text) return; // a notification or a response: nothing to answer
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        await fail(`the server answered ${res.status} with a body that is not JSON`);
        return;
      }
      const replies = (Array.isArray(body) ? body : [body]) as Array<JSONRPCMessage & { error?: string; code?: string }>;
      if (!replies.every((r) => r && (r as { jsonrpc?: unknown }).jsonrpc === '2.0')) {
        const e = body as { error?: string; code?: string };
        await fail(e.error ?? `the server answered ${res.status}`, e.code); // the gateway's own error body (401, 429, 503)
        return;
      }
      for (const reply of replies) {
        const result = (reply as { result?: { protocolVersion?: unknown; capabilities?: { tools?: Record<string, unknown> }; tools?: unknown } }).result;
        if (typeof result?.protocolVersion === 'string') {
          protocolVersion = result.protocolVersion;
          if (watchSeconds > 0 && result.capabilities?.tools) result.capabilities.tools.listChanged = true; // this relay tells of changes
        }
        if ('id' in reply && listRequests.delete(reply.id) && result?.tools !== undefined) seenTools = JSON.stringify(result.tools);
        await transport.send(reply);
      }
    };
    transport.onmessage = (message) => {
      const p = relay(message).catch((e: Error) => inv.say(`mcp: ${e.message}`));
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    };
    transport.onerror = (e) => inv.say(`mcp: ${e.message}`);
    const ended = new Promise<void>((resolve) => process.stdin.once('end', resolve));
    await transport.start();
    await ended;
    if (watch) clearInterval(watch);
    await Promise.all([...inFlight]);
    await transport.close();
  },
};
