// In charge of /api/v1/me and /api/v1/administrators: named administrators (owner, admin,
// developer, auditor) and their tokens. A token's secret is returned once, at issue, and only its
// SHA-256 is stored. Owners manage everyone; anyone their own tokens (api/access.ts). There is always
// an active owner once there is one (409 last_owner).
import * as v from 'valibot';
import type { Caller } from '../auth/keys.js';
import { hashSecret, keyExpired } from '../auth/keys.js';
import { type AdminRole, can, capabilitiesOf, DATA_ROLES, generateAdminToken, generateTokenId, RESERVED_ADMIN_NAMES, ROLES } from '../auth/roles.js';
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import type { AdminRow, AdminTokenRow } from '../store/admins.js';
import { localTimestamp } from '../store/store.js';
import type { ApiRouter, ControlContext } from './routes.js';
import { checkName, name, parseBody, readJson } from './validate.js';

const role = v.picklist(ROLES, `must be one of: ${ROLES.join(', ')}`);
const email = v.nullable(v.pipe(v.string('must be text'), v.regex(/^[^\s@]+@[^\s@]+$/, 'must be an email address')));
const date = v.pipe(
  v.string('must be text'),
  v.check((s) => /^\d{4}-\d{2}-\d{2}$/.test(s) && new Date(`${s}T00:00:00Z`).toISOString().slice(0, 10) === s, 'must be a date, YYYY-MM-DD'),
);
const createSchema = v.object({ name, role, email: v.optional(email) });
const patchSchema = v.object({ role: v.optional(role), email: v.optional(email), active: v.optional(v.boolean('must be true or false')) });
const tokenSchema = v.object({
  label: v.optional(v.nullable(v.pipe(v.string('must be text'), v.maxLength(100)))),
  expires_at: v.optional(v.nullable(date)),
});

export function adminView(a: AdminRow, tokens: number) {
  return {
    name: a.name,
    role: a.role,
    email: a.email,
    active: a.active,
    created_at: a.created_at,
    created_by: a.created_by,
    last_seen_at: a.last_seen_at,
    tokens,
  };
}

export function tokenView(t: AdminTokenRow) {
  return {
    id: t.id,
    admin: t.admin_name,
    label: t.label,
    created_at: t.created_at,
    expires_at: t.expires_at,
    expired: keyExpired(t.expires_at, new Date()),
    last_used_at: t.last_used_at,
  };
}

async function mustGet(ctx: ControlContext, n: string): Promise<AdminRow> {
  const a = await ctx.store.admins.get(n);
  if (!a) throw new GatewayError('admin_not_found', `Administrator '${n}' not found`);
  return a;
}

/** 409 last_owner when `a`, an active owner now, would stop being one and no other active owner exists. */
async function keepAnOwner(ctx: ControlContext, a: AdminRow, stillOwner: boolean): Promise<void> {
  if (a.role !== 'owner' || !a.active || stillOwner) return;
  if ((await ctx.store.admins.activeOwners()) <= 1) {
    throw new GatewayError('last_owner', `'${a.name}' is the last active owner; make another administrator an owner first`);
  }
}

export function administratorRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/me', (_ctx, _req, _p, who: Caller) => {
    const admin = who.admin!;
    return jsonAnswer(200, {
      name: admin.name,
      role: admin.role,
      via: admin.via,
      capabilities: capabilitiesOf(admin.role),
      data_access: DATA_ROLES.has(admin.role),
    });
  });

  r.add('GET', '/api/v1/administrators', async (ctx, _req, _p, who) => {
    const counts = await ctx.store.admins.tokenCounts();
    let items = (await ctx.store.admins.list()).map((a) => adminView(a, counts.get(a.name) ?? 0));
    // Someone who may not manage administrators sees only themselves.
    if (!can(who.admin!.role, 'admins.manage')) items = items.filter((a) => a.name === who.admin!.name);
    return jsonAnswer(200, { items });
  });

  r.add('POST', '/api/v1/administrators', async (ctx, req, _p, who) => {
    const b = parseBody(createSchema, readJson(req.body));
    checkName(b.name);
    if (RESERVED_ADMIN_NAMES.has(b.name)) throw new GatewayError('invalid_name', `The name '${b.name}' is reserved`);
    if (await ctx.store.getKey(b.name)) throw new GatewayError('name_taken', `An API key is named '${b.name}'; administrators and keys cannot share a name`);
    const now = localTimestamp();
    const row: AdminRow = {
      name: b.name,
      role: b.role as AdminRole,
      email: b.email ?? null,
      active: true,
      created_at: now,
      created_by: who.admin!.name,
      updated_at: now,
      last_seen_at: null,
    };
    if (!(await ctx.store.admins.put(row, true))) throw new GatewayError('admin_exists', `Administrator '${b.name}' already exists`);
    return jsonAnswer(201, adminView(row, 0));
  });

  r.add('GET', '/api/v1/administrators/:name', async (ctx, _req, [n]) => {
    const a = await mustGet(ctx, n);
    return jsonAnswer(200, adminView(a, (await ctx.store.admins.tokens(n)).length));
  });

  r.add('PATCH', '/api/v1/administrators/:name', async (ctx, req, [n]) => {
    const b = parseBody(patchSchema, readJson(req.body));
    const a = await mustGet(ctx, n);
    const next: AdminRow = { ...a, updated_at: localTimestamp() };
    if (b.role !== undefined) next.role = b.role as AdminRole;
    if (b.email !== undefined) next.email = b.email;
    if (b.active !== undefined) next.active = b.active;
    await keepAnOwner(ctx, a, next.role === 'owner' && next.active);
    await ctx.store.admins.put(next, false);
    return jsonAnswer(200, adminView(next, (await ctx.store.admins.tokens(n)).length));
  });

  r.add('DELETE', '/api/v1/administrators/:name', async (ctx, _req, [n]) => {
    await keepAnOwner(ctx, await mustGet(ctx, n), false);
    await ctx.store.admins.delete(n);
    return jsonAnswer(204, null);
  });

  r.add('GET', '/api/v1/administrators/:name/tokens', async (ctx, _req, [n]) => {
    await mustGet(ctx, n);
    return jsonAnswer(200, { items: (await ctx.store.admins.tokens(n)).map(tokenView) });
  });

  r.add('POST', '/api/v1/administrators/:name/tokens', async (ctx, req, [n]) => {
    const b = parseBody(tokenSchema, readJson(req.body, false));
    await mustGet(ctx, n);
    const secret = generateAdminToken();
    const token: AdminTokenRow = {
      id: generateTokenId(),
      admin_name: n,
      hash: hashSecret(secret),
      label: b.label ?? null,
      expires_at: b.expires_at ?? null,
      created_at: localTimestamp(),
      last_used_at: null,
    };
    await ctx.store.admins.addToken(token);
    return jsonAnswer(201, { ...tokenView(token), secret }, ['Cache-Control', 'no-store']);
  });

  r.add('DELETE', '/api/v1/administrators/:name/tokens/:id', async (ctx, _req, [n, id]) => {
    await mustGet(ctx, n);
    if (!(await ctx.store.admins.deleteToken(n, id))) throw new GatewayError('token_not_found', `Token '${id}' of '${n}' not found`);
    return jsonAnswer(204, null);
  });
}
