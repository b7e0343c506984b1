// In charge of /api/v1/api-keys: scoped keys and their grants. The secret is returned once, at
// creation, and only its SHA-256 is stored. Every grant field is validated here, then trusted; the
// queries and connections a key is granted must exist when granted.
import { isIP } from 'node:net';
import * as v from 'valibot';
import { generateSecret, hashSecret, keyExpired, nothingGranted } from '../auth/keys.js';
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import { closestName, listNames } from '../contract/suggest.js';
import { localTimestamp } from '../store/store.js';
import type { KeyGrants, KeyRow } from '../store/types.js';
import type { ApiRouter, ControlContext } from './routes.js';
import { checkName, collectionName, name, parseBody, RATE_LIMIT, readJson } from './validate.js';

const names = v.array(v.string('must be text'), 'must be a list of names');
const lowerNames = v.pipe(
  names,
  v.transform((a) => [...new Set(a.map((s) => s.toLowerCase()))].sort()),
);
// Table names keep their case and quotes: they are read as SQL names on the connection (governance/names.ts).
const tableNames = v.pipe(
  names,
  v.transform((a) => [...new Set(a.map((s) => s.trim()))].sort()),
);
const rateLimit = v.pipe(v.string('must be text'), v.regex(RATE_LIMIT, 'must look like N/second, N/minute, N/hour or N/day'));
const ipOrCidr = v.pipe(v.string('must be text'), v.check(validIpOrCidr, 'must be an IPv4 or IPv6 address or CIDR'));
const date = v.pipe(v.string('must be text'), v.check(validDate, 'must be a date, YYYY-MM-DD'));

/** The grant fields a key and a key role share (roles/ reads them too). */
export const grantFields = {
  connections: v.optional(v.union([v.literal('*'), names], 'must be "*" or a list of connection names')),
  queries: v.optional(
    v.union(
      [v.literal('*'), v.array(v.union([v.string(), v.object({ name: v.string(), allow_writes: v.boolean() })]), 'must be names or {"name", "allow_writes"}')],
      'must be "*" or a list of query grants',
    ),
  ),
  allow_writes: v.optional(v.boolean('must be true or false')),
  allowed_write_ops: v.optional(v.nullable(lowerNames)),
  allowed_tables: v.optional(v.nullable(tableNames)),
  mask: v.optional(
    v.nullable(
      v.array(
        v.object({
          column: v.pipe(v.string('must be text'), v.minLength(1)),
          action: v.picklist(['hash', 'mask', 'null', 'drop'], 'must be hash, mask, null or drop'),
        }),
      ),
    ),
  ),
  mask_predicates: v.optional(v.picklist(['allow', 'refuse'], "must be 'allow' or 'refuse'")),
  rate_limit: v.optional(v.nullable(rateLimit)),
  rate_limits: v.optional(v.nullable(v.record(v.string(), rateLimit))),
  allowed_ips: v.optional(v.nullable(v.array(ipOrCidr, 'must be a list of addresses'))),
  collections: v.optional(
    v.pipe(
      v.array(collectionName, 'must be a list of collection names'),
      v.transform((a) => [...new Set(a)].sort()),
    ),
  ),
};
const grants = {
  ...grantFields,
  expires_at: v.optional(v.nullable(date)),
  active: v.optional(v.boolean('must be true or false')),
};
const createSchema = v.object({ name, role: v.optional(name), ...grants });
const rotateSchema = v.object({
  grace_seconds: v.optional(v.pipe(v.number('must be a number'), v.integer('must be an integer'), v.minValue(0), v.maxValue(30 * 86400))),
});
const patchSchema = v.object(grants);

function validIpOrCidr(s: string): boolean {
  const [addr, bits, extra] = s.split('/');
  const family = isIP(addr);
  if (!family || extra !== undefined) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && +bits <= (family === 4 ? 32 : 128);
}

function validDate(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
}

export function keyView(k: KeyRow) {
  return {
    name: k.name,
    connections: k.connections,
    queries: k.queries,
    allow_writes: k.allow_writes,
    allowed_write_ops: k.allowed_write_ops,
    allowed_tables: k.allowed_tables,
    mask: k.mask,
    mask_predicates: k.mask_predicates ?? 'allow',
    rate_limit: k.rate_limit,
    rate_limits: k.rate_limits,
    allowed_ips: k.allowed_ips,
    collections: k.collections ?? [],
    expires_at: k.expires_at,
    active: k.active,
    expired: keyExpired(k.expires_at, new Date()),
    created_at: k.created_at,
    last_used_at: k.last_used_at,
    example: k.example,
    created_from_role: k.created_from_role ?? null,
    // After a rotation with grace: until when the previous secret still works (null when it doesn't).
    previous_secret_valid_until: k.previous_until !== null && k.previous_until > Date.now() ? localTimestamp(new Date(k.previous_until)) : null,
  };
}

type GrantInput = v.InferOutput<typeof patchSchema>;

export function applyGrants(k: KeyGrants, b: Partial<GrantInput>): void {
  for (const f of Object.keys(grants) as Array<keyof GrantInput>) {
    if (b[f] !== undefined) (k as unknown as Record<string, unknown>)[f] = b[f];
  }
  if (Array.isArray(k.connections)) k.connections = [...new Set(k.connections)].sort();
}

/**
 * 400 unknown_grant when the body grants a query or connection that does not exist: `errors` says,
 * per field, which (with the closest real name) and the message also lists the real ones. Only the
 * names this body grants are checked, so a key whose query was deleted can still be changed.
 */
export async function checkGrantedNames(ctx: ControlContext, b: Partial<GrantInput>): Promise<void> {
  const errors: Record<string, string> = {};
  const sentences: string[] = [];
  const check = async (
    field: 'queries' | 'connections' | 'collections',
    names: string[],
    exists: (n: string) => Promise<boolean>,
    list: () => Promise<string[]>,
  ) => {
    const unknown: string[] = [];
    for (const n of new Set(names)) if (!(await exists(n))) unknown.push(n);
    if (!unknown.length) return;
    const real = await list();
    const what = WHAT[field];
    errors[field] = unknown
      .map((n) => {
        const near = closestName(n, real);
        return `no ${what} '${n}'${near ? ` (did you mean '${near}'?)` : ''}`;
      })
      .join('; ');
    sentences.push(`${errors[field]}; the ${field === 'queries' ? 'saved queries' : field} are ${listNames(real)}`);
  };
  if (Array.isArray(b.queries)) {
    await check(
      'queries',
      b.queries.map((g) => (typeof g === 'string' ? g : g.name)),
      async (n) => (await ctx.store.getQuery(n)) !== null,
      async () => (await ctx.store.listQueries()).map((q) => q.name),
    );
  }
  if (Array.isArray(b.connections)) {
    await check(
      'connections',
      b.connections,
      async (n) => (await ctx.store.getConnection(n)) !== null,
      async () => (await ctx.store.listConnections()).map((c) => c.name),
    );
  }
  if (b.collections?.length) {
    // A collection exists while a query is in it; the names are read once.
    const real = await ctx.store.collectionNames();
    await check(
      'collections',
      b.collections,
      async (n) => real.includes(n),
      async () => real,
    );
  }
  if (sentences.length) throw new GatewayError('unknown_grant', `This key grants what does not exist: ${sentences.join('. ')}`, { errors });
}

const WHAT = { queries: 'saved query', connections: 'connection', collections: 'collection' } as const;

async function mustGet(ctx: ControlContext, n: string): Promise<KeyRow> {
  const k = await ctx.store.getKey(n);
  if (!k) throw new GatewayError('key_not_found', `API key '${n}' not found`);
  return k;
}

/** A role's grants, deep-copied so the key shares nothing with the role's row. */
function roleGrants(r: KeyGrants): Partial<GrantInput> {
  const g: Record<string, unknown> = {};
  for (const f of Object.keys(grantFields)) {
    const value = (r as unknown as Record<string, unknown>)[f];
    if (value !== undefined) g[f] = structuredClone(value);
  }
  return g as Partial<GrantInput>;
}

export function apiKeyRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/api-keys', async (ctx) => jsonAnswer(200, { items: (await ctx.store.listKeys()).map(keyView) }));

  r.add('POST', '/api/v1/api-keys', async (ctx, req) => {
    const b = parseBody(createSchema, readJson(req.body));
    checkName(b.name);
    if (b.name === 'admin') throw new GatewayError('invalid_name', "The name 'admin' is reserved");
    if (await ctx.store.admins.get(b.name))
      throw new GatewayError('name_taken', `An administrator is named '${b.name}'; keys and administrators cannot share a name`);
    const { role: roleName, ...fields } = b;
    const role = roleName === undefined ? null : await ctx.store.getRole(roleName);
    if (roleName !== undefined) {
      // A role's grants are copied whole: only the key's own expiry may be given beside it.
      const extra = Object.keys(fields).filter((f) => f !== 'name' && f !== 'expires_at' && fields[f as keyof typeof fields] !== undefined);
      if (extra.length) throw new GatewayError('invalid_body', `role cannot be combined with ${extra.join(', ')}: only expires_at may be given with it`);
      if (!role) throw new GatewayError('role_not_found', `Key role '${roleName}' not found`);
    } else await checkGrantedNames(ctx, b);
    const secret = generateSecret();
    const now = localTimestamp();
    // A key granted nothing, then given the body's grants (nothingGranted is the one such row).
    const key: KeyRow = { ...nothingGranted(b.name), hash: hashSecret(secret), created_at: now, updated_at: now };
    // Omitted connections means every connection, as the contract's key model says.
    key.connections = '*';
    if (role) {
      // Copied once: changing the role later never touches this key.
      applyGrants(key, roleGrants(role));
      key.created_from_role = role.name;
      key.expires_at = b.expires_at ?? null;
    } else applyGrants(key, fields);
    if (!(await ctx.store.putKey(key, true))) throw new GatewayError('key_exists', `API key '${b.name}' already exists`);
    if (role) await ctx.store.noteRoleUsed(role.name);
    return jsonAnswer(201, { ...keyView(key), secret }, ['Cache-Control', 'no-store']);
  });

  r.add('GET', '/api/v1/api-keys/:name', async (ctx, _req, [n]) => jsonAnswer(200, keyView(await mustGet(ctx, n))));

  r.add('PATCH', '/api/v1/api-keys/:name', async (ctx, req, [n]) => {
    const b = parseBody(patchSchema, readJson(req.body));
    const key = await mustGet(ctx, n);
    await checkGrantedNames(ctx, b);
    applyGrants(key, b);
    key.updated_at = localTimestamp();
    await ctx.store.putKey(key, false);
    return jsonAnswer(200, keyView(key));
  });

  r.add('POST', '/api/v1/api-keys/:name/rotate', async (ctx, req, [n]) => {
    const b = parseBody(rotateSchema, readJson(req.body, false));
    await mustGet(ctx, n);
    const secret = generateSecret();
    const grace = b.grace_seconds ?? 0;
    await ctx.store.rotateKey(n, hashSecret(secret), grace > 0 ? Date.now() + grace * 1000 : null, localTimestamp());
    return jsonAnswer(200, { ...keyView(await mustGet(ctx, n)), secret }, ['Cache-Control', 'no-store']);
  });

  r.add('DELETE', '/api/v1/api-keys/:name', async (ctx, _req, [n]) => {
    if (!(await ctx.store.deleteKey(n))) throw new GatewayError('key_not_found', `API key '${n}' not found`);
    return jsonAnswer(204, null);
  });
}
