// In charge of what a caller may reach, as /q/ decides it: the saved queries (through the call's own
// authorizeCall, so the catalog and the call cannot disagree) and the connections a key may name for
// ad-hoc SQL (its `connections` grant). Pure decisions over store rows.
import type { Caller } from '../auth/keys.js';
import { authorizeCall } from '../call/authorize.js';
import { GatewayError } from '../contract/errors.js';
import type { ConnectionRow, QueryRow, VersionRow } from '../store/types.js';

/** A saved query as this caller would reach it with a plain GET /q/<name>. */
export interface ReachableQuery {
  query: QueryRow;
  /** The published version, or for administrators of a query never published, its newest version. */
  version: VersionRow;
  published: boolean;
  /** The connections this caller may run it on: the saved one, or (without one) those it may name. */
  connections: string[];
}

/** The connections a caller may name (connection_name, ad-hoc SQL): all for administrators, else the key's grant. */
export function grantedConnections(caller: Caller, connections: ConnectionRow[]): ConnectionRow[] {
  if (caller.kind !== 'key') return connections;
  const grant = caller.key.connections;
  return grant === '*' ? connections : connections.filter((c) => grant.includes(c.name));
}

/**
 * The queries this caller may call, by name. A scoped key sees only published versions (a draft's
 * number answers it 404); administrators see every query, a never-published one at its newest version.
 */
export function reachableQueries(caller: Caller, queries: QueryRow[], namable: ConnectionRow[]): ReachableQuery[] {
  const out: ReachableQuery[] = [];
  for (const query of queries) {
    const published = query.published_version !== null ? query.versions.find((v) => v.version === query.published_version) : undefined;
    const version = published ?? (caller.kind === 'key' ? undefined : query.versions.at(-1));
    if (!version) continue;
    const saved = version.connection_name;
    const candidates = saved !== null ? [saved] : namable.map((c) => c.name);
    const connections = candidates.filter((connection) => allowed(caller, query.name, saved, connection, query.collection));
    if (connections.length) out.push({ query, version, published: published !== undefined, connections });
  }
  return out;
}

function allowed(caller: Caller, name: string, saved: string | null, connection: string, collection: string | null): boolean {
  try {
    authorizeCall(caller, name, saved, connection, collection);
    return true;
  } catch (e) {
    if (e instanceof GatewayError) return false;
    throw e;
  }
}
