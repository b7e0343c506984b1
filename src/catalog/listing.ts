// In charge of the /catalog body for one caller: who it is and under what terms it calls (its grants),
// the saved queries it may reach with their parameters, writes, masks and columns, and the connections
// it may name. Pure: facts in, a plain object out; nothing secret (no SQL, no hosts, no passwords).
import type { Caller } from '../auth/keys.js';
import { toPublicRule } from '../call/paramRules.js';
import type { ConnectionRow } from '../store/types.js';
import type { QueryFacts } from './describe.js';

export function catalogListing(
  caller: Caller,
  queries: QueryFacts[],
  connections: ConnectionRow[],
  server: { allowWrites: boolean; rateLimit: string | null },
) {
  const key = caller.kind === 'key' ? caller.key : null;
  return {
    caller: {
      name: caller.name,
      admin: key === null,
      allow_writes: server.allowWrites && (key === null || key.allow_writes),
      allowed_write_ops: key?.allowed_write_ops ?? null,
      allowed_tables: key?.allowed_tables ?? null,
      mask: key?.mask ?? null,
      rate_limit: key?.rate_limit ?? null,
      rate_limits: key?.rate_limits ?? null,
      server_rate_limit: server.rateLimit,
    },
    queries: queries.map((q) => ({
      name: q.name,
      version: q.version,
      published: q.published,
      description: q.description,
      tags: q.tags,
      collection: q.collection,
      connection_name: q.connection,
      connections: q.connections,
      parameters: Object.fromEntries(q.parameters.map((p) => [p.name, p.rule ? toPublicRule(p.rule) : { type: null, required: true, declared: false }])),
      cache_ttl: q.cacheTtl,
      writes: q.writes,
      can_write: q.canWrite,
      columns: q.columns?.map((c) => ({ name: c.name, type: c.dataType })) ?? null,
      masked: q.masked,
      refused: q.refused,
    })),
    connections: connections.map((c) => ({ name: c.name, db: c.db, active: c.active })),
  };
}
