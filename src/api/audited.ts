// In charge of which management change is audited as what: route -> action, the resource it
// changes and that resource's ids; and of writing an entry (actor and via from the administrator).
// Routes of resources without a snapshot reader are audited with the request's non-secret fields.
import type { AdminIdentity } from '../auth/roles.js';
import { localTimestamp } from '../store/store.js';
import { logger } from '../log.js';
import type { AuditEntry } from '../store/audit.js';
import { routeSlot } from './access.js';
import type { ControlContext } from './routes.js';
import type { Resource } from './snapshots.js';

export interface AuditSpec {
  action: string;
  /** null: no snapshot reader (the entry records the request's fields instead). */
  resource: Resource | null;
  /** True for a create: nothing to read before, the ids come from the answer. */
  create?: true;
  /** The resource's ids from the path parameters and (for a create) the answer's JSON. */
  ids: (params: string[], answer: Record<string, unknown> | null) => string[];
}

const byParams = (p: string[]) => p.slice(0, 1);
const byName = (_p: string[], a: Record<string, unknown> | null) => [String(a?.name ?? '')];
const spec = (action: string, resource: Resource | null, ids = byParams): AuditSpec => ({ action, resource, ids });
const created = (action: string, resource: Resource, ids = byName): AuditSpec => ({ action, resource, create: true, ids });

const TABLE: Record<string, AuditSpec> = {
  'POST /api/v1/connections': created('create_connection', 'connection'),
  'PATCH /api/v1/connections/:': spec('update_connection', 'connection'),
  'DELETE /api/v1/connections/:': spec('delete_connection', 'connection'),
  'POST /api/v1/queries': created('save_query', 'query'),
  'POST /api/v1/queries/:/versions': spec('save_query', 'query'),
  'PATCH /api/v1/queries/:': spec('move_query', 'query'),
  'PATCH /api/v1/queries/:/versions/:': spec('update_query', 'query'),
  'DELETE /api/v1/queries/:/versions/:': spec('delete_query_version', 'query'),
  'POST /api/v1/queries/:/publish': spec('publish_query', 'query'),
  'POST /api/v1/queries/:/unpublish': spec('unpublish_query', 'query'),
  'DELETE /api/v1/queries/:': spec('delete_query', 'query'),
  'POST /api/v1/api-keys': created('create_key', 'key'),
  'PATCH /api/v1/api-keys/:': spec('update_key', 'key'),
  'POST /api/v1/api-keys/:/rotate': spec('rotate_key', 'key'),
  'DELETE /api/v1/api-keys/:': spec('delete_key', 'key'),
  'POST /api/v1/administrators': created('create_admin', 'administrator'),
  'PATCH /api/v1/administrators/:': spec('update_admin', 'administrator'),
  'DELETE /api/v1/administrators/:': spec('delete_admin', 'administrator'),
  'POST /api/v1/administrators/:/tokens': created('issue_admin_token', 'token', (p, a) => [p[0], String(a?.id ?? '')]),
  'DELETE /api/v1/administrators/:/tokens/:': spec('revoke_admin_token', 'token', (p) => p.slice(0, 2)),
  'POST /api/v1/roles': spec('create_role', null),
  'PATCH /api/v1/roles/:': spec('update_role', null),
  'DELETE /api/v1/roles/:': spec('delete_role', null),
  'PATCH /api/v1/collections/:': spec('rename_collection', null),
  'POST /api/v1/examples': spec('load_examples', null),
  'DELETE /api/v1/examples': spec('unload_examples', null),
  // The cache's DELETE routes save nothing (NOTHING_CHANGED, api/cache.ts), so they are not audited:
  // contract 1.7, "Clearing the cache is not audited".
};

/** A change route's spec; a change route the table does not list is audited by its method and path. */
export function auditSpec(method: string, pattern: string): AuditSpec {
  return (
    TABLE[routeSlot(method, pattern)] ?? {
      action: `${method.toLowerCase()}_${pattern
        .replace(/^\/api\/v1\//, '')
        .replace(/\/:[^/]+/g, '')
        .replaceAll(/[/-]/g, '_')}`,
      resource: null,
      ids: byParams,
    }
  );
}

/** The ETag each single-object GET carries, by resource. */
const READS: Record<string, Resource> = {
  'GET /api/v1/connections/:': 'connection',
  'GET /api/v1/queries/:': 'query',
  'GET /api/v1/api-keys/:': 'key',
  'GET /api/v1/administrators/:': 'administrator',
};

export function readResource(method: string, pattern: string): Resource | null {
  return READS[routeSlot(method, pattern)] ?? null;
}

/** Fields whose values are never written to the audit log, whatever the route. */
const SECRET_FIELD = /password|secret|token|hash/i;

/** A request body as an entry records it when the resource has no snapshot: its fields, secrets shown as '********'. */
export function bodyChanges(body: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) out[k] = SECRET_FIELD.test(k) ? '********' : v;
  return out;
}

/** The bundled examples installed outside the API (at start-up, or `examples load`): what was created, never a secret. */
export async function auditExamplesLoaded(
  ctx: Pick<ControlContext, 'store' | 'config'>,
  admin: AdminIdentity,
  loaded: { createdQueries: number; createdKeys: Array<{ name: string }> },
): Promise<void> {
  if (!loaded.createdQueries && !loaded.createdKeys.length) return;
  await writeAudit(ctx, admin, 'load_examples', null, {
    source: 'import',
    queries_created: loaded.createdQueries,
    keys_created: loaded.createdKeys.map((k) => k.name),
  });
}

/** Appends an entry for `admin`'s change; a failure is logged (the change itself is made). */
export async function writeAudit(
  ctx: Pick<ControlContext, 'store' | 'config'>,
  admin: AdminIdentity,
  action: string,
  target: string | null,
  changes: Record<string, unknown>,
): Promise<AuditEntry | null> {
  try {
    return await ctx.store.audit.append({ actor: admin.name, via: admin.via, action, target, changes }, localTimestamp(), ctx.config.auditLogLimit);
  } catch (e) {
    logger('audit').error(`the audit entry for ${action} could not be written: ${(e as Error).message}`);
    return null;
  }
}
