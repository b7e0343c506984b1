// In charge of the MCP tools a caller sees: one per published saved query it may call (its input
// schema from the query's parameters, its description from the query's; a query that writes only for a
// caller who may write it), and, for callers with a connections grant, `list_tables` and `execute_sql`.
// Reach and parameters are the catalog's reading (catalog/describe.ts), so MCP, /q/ and /catalog agree.
import type { Caller } from '../auth/keys.js';
import { mayWrite } from '../call/govern.js';
import type { CallContext } from '../call/context.js';
import { describeReachable } from '../catalog/build.js';
import type { JsonSchema } from '../catalog/columns.js';
import { parameterSchema } from '../catalog/openapi.js';
import { grantedConnections, reachableQueries } from '../catalog/reach.js';
import type { QueryRow } from '../store/types.js';

export interface McpTool {
  name: string;
  description: string;
  kind: 'saved query' | 'ad-hoc';
  /** Parameter names, in the binder's order. */
  params: string[];
  read_only: boolean;
  inputSchema: JsonSchema & { type: 'object' };
}

export const LIST_TABLES = 'list_tables';
export const EXECUTE_SQL = 'execute_sql';

/** A tool name as MCP clients accept it (letters, digits, _ and -, at most 64), unique, never a built-in's. */
function toolNames(queries: QueryRow[]): Map<string, QueryRow> {
  const out = new Map<string, QueryRow>();
  const taken = new Set([LIST_TABLES, EXECUTE_SQL]);
  for (const q of queries) {
    const base = q.name.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 60);
    let name = taken.has(base) ? `${base}_q` : base;
    for (let n = 2; taken.has(name); n++) name = `${base}_${n}`;
    taken.add(name);
    out.set(name, q);
  }
  return out;
}

/** The published queries this caller reaches, by tool name (the same names whichever of them are listed). */
export async function queryTools(ctx: CallContext, caller: Caller): Promise<Map<string, QueryRow>> {
  const [queries, connections] = await Promise.all([ctx.store.listQueries(), ctx.store.listConnections()]);
  const reachable = reachableQueries(caller, queries, grantedConnections(caller, connections)).filter((r) => r.published);
  return toolNames(reachable.map((r) => r.query));
}

/** Whether the caller may run ad-hoc SQL on some connection (a connections grant that names any). */
export function hasConnectionGrant(caller: Caller): boolean {
  return caller.kind !== 'key' || caller.key.connections === '*' || caller.key.connections.length > 0;
}

export async function listTools(ctx: CallContext, caller: Caller): Promise<McpTool[]> {
  const [{ facts, namable }, named] = await Promise.all([describeReachable(ctx, caller), queryTools(ctx, caller)]);
  const byQuery = new Map(facts.map((f) => [f.name, f]));
  const tools: McpTool[] = [];
  for (const [name, query] of named) {
    const f = byQuery.get(query.name);
    // A statement that cannot be planned, a call governance refuses, a write the caller may not make: not offered.
    if (!f || f.writes === null || f.refused || (f.writes && !mayWrite(caller, query.name, ctx.config.allowWrites))) continue;
    const properties: Record<string, JsonSchema> = {};
    const required: string[] = [];
    for (const p of f.parameters) {
      const { schema, required: must } = parameterSchema(p.rule);
      properties[p.name] = p.rule?.description ? { ...schema, description: p.rule.description } : schema;
      if (must) required.push(p.name);
    }
    tools.push({
      name,
      description: f.description || `The saved query ${query.name}`,
      kind: 'saved query',
      params: f.parameters.map((p) => p.name),
      read_only: !f.writes,
      inputSchema: { type: 'object', properties, required, additionalProperties: false },
    });
  }
  if (hasConnectionGrant(caller) && namable.length) {
    const connection = { type: 'string', enum: namable.map((c) => c.name), description: 'The connection to run on' };
    tools.push({
      name: LIST_TABLES,
      description: 'Lists the tables of a connection this key may read, with their columns and types.',
      kind: 'ad-hoc',
      params: ['connection_name'],
      read_only: true,
      inputSchema: { type: 'object', properties: { connection_name: connection }, required: ['connection_name'], additionalProperties: false },
    });
    const writes = mayWrite(caller, null, ctx.config.allowWrites);
    tools.push({
      name: EXECUTE_SQL,
      description: `Runs one SQL statement on a connection${writes ? '' : ' (read-only: SELECT, WITH, SHOW, DESCRIBE, EXPLAIN)'}, with the key's table restrictions and masks. Values go in params as :name markers. At most ${ctx.config.mcpMaxRows} rows are answered.`,
      kind: 'ad-hoc',
      params: ['connection_name', 'sql', 'params', 'page_size'],
      read_only: !writes,
      inputSchema: {
        type: 'object',
        properties: {
          connection_name: connection,
          sql: { type: 'string', description: 'One SQL statement' },
          params: { type: 'object', description: 'Values for the :name markers in the statement' },
          page_size: { type: 'integer', minimum: 1, maximum: ctx.config.mcpMaxRows, description: 'Rows at most' },
        },
        required: ['connection_name', 'sql'],
        additionalProperties: false,
      },
    });
  }
  return tools;
}
