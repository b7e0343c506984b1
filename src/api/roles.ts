// In charge of /api/v1/roles: key roles, templates of the grants a key has. A key made with
// `"role": "<name>"` gets a copy of them once (api-keys), so changing or deleting a role never
// touches keys already made from it; signed-in (JWT) users read their role's grants live.
import * as v from 'valibot';
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import { localTimestamp } from '../store/store.js';
import type { RoleRow } from '../store/types.js';
import { applyGrants, checkGrantedNames, grantFields } from './apiKeys.js';
import type { ApiRouter, ControlContext } from './routes.js';
import { checkName, name, parseBody, readJson } from './validate.js';

const createSchema = v.object({ name, ...grantFields });
const patchSchema = v.object(grantFields);

export function roleView(r: RoleRow) {
  return {
    name: r.name,
    connections: r.connections,
    queries: r.queries,
    collections: r.collections ?? [],
    allow_writes: r.allow_writes,
    allowed_write_ops: r.allowed_write_ops,
    allowed_tables: r.allowed_tables,
    mask: r.mask,
    mask_predicates: r.mask_predicates ?? 'allow',
    rate_limit: r.rate_limit,
    rate_limits: r.rate_limits,
    allowed_ips: r.allowed_ips,
    created_at: r.created_at,
    example: r.example,
    keys_created: r.keys_created,
  };
}

async function mustGet(ctx: ControlContext, n: string): Promise<RoleRow> {
  const r = await ctx.store.getRole(n);
  if (!r) throw new GatewayError('role_not_found', `Key role '${n}' not found`);
  return r;
}

export function roleRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/roles', async (ctx) => jsonAnswer(200, { items: (await ctx.store.listRoles()).map(roleView) }));

  r.add('POST', '/api/v1/roles', async (ctx, req) => {
    const b = parseBody(createSchema, readJson(req.body));
    checkName(b.name);
    await checkGrantedNames(ctx, b);
    const now = localTimestamp();
    // The defaults a key has: every connection unless the role says otherwise, no queries or collections.
    const role: RoleRow = {
      name: b.name,
      example: false,
      keys_created: 0,
      created_at: now,
      updated_at: now,
      connections: '*',
      queries: [],
      collections: [],
      allow_writes: false,
      allowed_write_ops: null,
      allowed_tables: null,
      mask: null,
      rate_limit: null,
      rate_limits: null,
      allowed_ips: null,
    };
    const { name: _, ...grants } = b;
    applyGrants(role, grants);
    if (!(await ctx.store.putRole(role, true))) throw new GatewayError('role_exists', `Key role '${b.name}' already exists`);
    return jsonAnswer(201, roleView(role));
  });

  r.add('GET', '/api/v1/roles/:name', async (ctx, _req, [n]) => jsonAnswer(200, roleView(await mustGet(ctx, n))));

  r.add('PATCH', '/api/v1/roles/:name', async (ctx, req, [n]) => {
    const b = parseBody(patchSchema, readJson(req.body));
    const role = await mustGet(ctx, n);
    await checkGrantedNames(ctx, b);
    applyGrants(role, b);
    role.updated_at = localTimestamp();
    if (!(await ctx.store.putRole(role, false))) throw new GatewayError('role_not_found', `Key role '${n}' not found`);
    return jsonAnswer(200, roleView(role));
  });

  r.add('DELETE', '/api/v1/roles/:name', async (ctx, _req, [n]) => {
    if (!(await ctx.store.deleteRole(n))) throw new GatewayError('role_not_found', `Key role '${n}' not found`);
    return jsonAnswer(204, null);
  });
}
