// In charge of the resolve and authorize stages: which saved query and version a call names, which
// connection it runs on, and whether this caller may reach them. Pure decisions over store rows.
import type { Caller } from '../auth/keys.js';
import { GatewayError } from '../contract/errors.js';
import { localTimestamp } from '../store/store.js';
import type { ConnectionRow, QueryRow, VersionRow } from '../store/types.js';
import type { CallRequest } from './request.js';

/** What a call runs: the query, its version and the connection, once the caller may reach them. */
export interface Target {
  query: QueryRow;
  version: VersionRow;
  connectionName: string;
  /** When the run started, as history records it. */
  executedAt: string;
}

/** The query (as read), the version the request asks for, the connection it names; refused if out of reach. */
export function resolveTarget(query: QueryRow | null, req: CallRequest, caller: Caller): Target {
  if (!query) throw new GatewayError('query_not_found', `Saved query '${req.name}' not found`);
  const version = selectVersion(query, req.version, caller);
  const connectionName = req.connectionName ?? version.connection_name;
  if (!connectionName) throw new GatewayError('connection_required', 'Connection name is missing');
  authorizeCall(caller, query.name, version.connection_name, connectionName, query.collection);
  return { query, version, connectionName, executedAt: localTimestamp() };
}

const isAdmin = (c: Caller) => c.kind !== 'key';

/** The published version, or ?version=N; a draft is visible to administrators only. */
export function selectVersion(query: QueryRow, requested: number | null, caller: Caller): VersionRow {
  if (requested === null) {
    if (query.published_version === null) throw new GatewayError('not_published', 'This query has no published version');
    const v = query.versions.find((x) => x.version === query.published_version);
    if (!v) throw new GatewayError('not_published', 'This query has no published version');
    return v;
  }
  const v = query.versions.find((x) => x.version === requested);
  if (!v || (!v.was_published && query.published_version !== v.version && !isAdmin(caller))) {
    throw new GatewayError('version_not_found', `Version ${requested} not found`);
  }
  return v;
}

/**
 * A key reaches a query by name through its queries grant, or through a collections grant on the
 * collection the query is in now (read from the query's own row, which the call has already read).
 */
function grantedByName(caller: Caller & { kind: 'key' }, name: string, collection: string | null): boolean {
  const q = caller.key.queries;
  if (q === '*') return true;
  for (const g of q) if ((typeof g === 'string' ? g : g.name) === name) return true;
  const c = caller.key.collections;
  return collection !== null && c !== undefined && c.length > 0 && c.includes(collection);
}

/**
 * A queries or collections grant reaches a query on its own saved connection only; any other connection needs a
 * connections grant ("*" or the name). A refusal on the query's own connection is about the query
 * (query_forbidden: the key grants neither it nor that connection); on a connection the request
 * asked for instead, it is about that connection (connection_forbidden).
 */
export function authorizeCall(caller: Caller, queryName: string, savedConnection: string | null, connection: string, collection: string | null = null): void {
  if (caller.kind !== 'key') return;
  if (grantedByName(caller, queryName, collection) && connection === savedConnection) return;
  const c = caller.key.connections;
  if (c === '*' || c.includes(connection)) return;
  if (connection === savedConnection) {
    throw new GatewayError('query_forbidden', `This API key is not granted the query '${queryName}'`);
  }
  throw new GatewayError('connection_forbidden', `This API key is not permitted to use the connection '${connection}'`);
}

/** Ad-hoc SQL is reached through a connections grant alone: a queries grant never allows it. */
export function authorizeAdhoc(caller: Caller, connection: string): void {
  if (caller.kind !== 'key') return;
  const c = caller.key.connections;
  if (c === '*' || c.includes(connection)) return;
  throw new GatewayError('connection_forbidden', `This API key is not permitted to use the connection '${connection}'`);
}

export function checkConnection(conn: ConnectionRow | null, name: string): ConnectionRow {
  if (!conn) throw new GatewayError('connection_not_found', `Connection '${name}' not found`);
  if (!conn.active) {
    throw new GatewayError('connection_inactive', `The connection '${name}' is currently not active. To use it, it must be set to active.`);
  }
  return conn;
}
