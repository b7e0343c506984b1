// In charge of the pure deciding stages between resolving a call and planning it: which version
// runs, whether the caller may reach the query and its connection, and whether it may write.
import type { Caller } from '../auth/keys.js';
import type { ConnectionRow, QueryRow, VersionRow } from '../store/types.js';
import { CallError } from './errors.js';

const isAdmin = (c: Caller) => c.kind !== 'key';

/** The published version, or ?version=N; a draft is visible to administrators only. */
export function selectVersion(query: QueryRow, requested: number | null, caller: Caller): VersionRow {
  if (requested === null) {
    if (query.published_version === null) throw new CallError('not_published', 'This query has no published version');
    const v = query.versions.find((x) => x.version === query.published_version);
    if (!v) throw new CallError('not_published', 'This query has no published version');
    return v;
  }
  const v = query.versions.find((x) => x.version === requested);
  if (!v || (!v.was_published && query.published_version !== v.version && !isAdmin(caller))) {
    throw new CallError('version_not_found', `Version ${requested} not found`);
  }
  return v;
}

function grantedByName(caller: Caller & { kind: 'key' }, name: string): boolean {
  const q = caller.key.queries;
  if (q === '*') return true;
  for (const g of q) if ((typeof g === 'string' ? g : g.name) === name) return true;
  return false;
}

/**
 * A queries grant reaches a query on its own saved connection only; any other connection needs a
 * connections grant ("*" or the name).
 */
export function authorizeCall(caller: Caller, queryName: string, savedConnection: string | null, connection: string): void {
  if (caller.kind !== 'key') return;
  if (grantedByName(caller, queryName) && connection === savedConnection) return;
  const c = caller.key.connections;
  if (c === '*' || c.includes(connection)) return;
  throw new CallError('connection_forbidden', `This API key is not permitted to use the connection '${connection}'`);
}

export function checkConnection(conn: ConnectionRow | null, name: string): ConnectionRow {
  if (!conn) throw new CallError('connection_not_found', `Connection '${name}' not found`);
  if (!conn.active) {
    throw new CallError('connection_inactive', `The connection '${name}' is currently not active. To use it, it must be set to active.`);
  }
  return conn;
}
