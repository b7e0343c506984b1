// In charge of /api/v1/connections: create, list, get, patch, delete. Passwords are never returned
// (a ${VAR} reference is shown as written); a change tells every executor to replace its pools.
import * as v from 'valibot';
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import { localTimestamp } from '../store/store.js';
import type { ConnectionRow } from '../store/types.js';
import type { ApiRouter, ChangeOf } from './routes.js';
import { checkName, name, optionalText, parseBody, readJson } from './validate.js';

export const DB_TYPES = ['postgres', 'postgresql', 'sqlite', 'mysql'] as const;

const fields = {
  db: v.picklist(DB_TYPES, `must be one of: ${DB_TYPES.join(', ')}`),
  active: v.boolean('must be true or false'),
  host: optionalText,
  port: v.optional(v.nullable(v.pipe(v.number('must be a number'), v.integer('must be an integer'), v.minValue(1), v.maxValue(65535)))),
  user: optionalText,
  password: optionalText,
  database: optionalText,
  options: v.optional(v.nullable(v.record(v.string(), v.unknown(), 'must be an object'))),
};
const createSchema = v.object({ name, ...fields, active: v.optional(fields.active, true) });
const patchSchema = v.object({ ...fields, db: v.optional(fields.db), active: v.optional(fields.active) });
const deleteSchema = v.object({ reason: v.optional(v.string('must be text')) });

const MASK = '********';
const isReference = (s: string | null) => !!s && /^\$\{[A-Za-z_][A-Za-z0-9_]*\}$/.test(s);

export function connectionSummary(c: ConnectionRow) {
  return {
    name: c.name,
    db: c.db,
    active: c.active,
    host: c.host,
    port: c.port,
    database: c.database,
    user: c.user,
    example: c.example,
    created_at: c.created_at,
    updated_at: c.updated_at,
  };
}

function connectionDetail(c: ConnectionRow) {
  return { ...connectionSummary(c), password: c.password === null ? null : isReference(c.password) ? c.password : MASK, options: c.options ?? {} };
}

export function connectionRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/connections', async (ctx) => jsonAnswer(200, { items: (await ctx.store.listConnections()).map(connectionSummary) }));

  r.add('POST', '/api/v1/connections', async (ctx, req) => {
    const b = parseBody(createSchema, readJson(req.body));
    checkName(b.name);
    const now = localTimestamp();
    const row: ConnectionRow = {
      name: b.name,
      db: b.db === 'postgresql' ? 'postgres' : b.db,
      active: b.active,
      host: b.host ?? null,
      port: b.port ?? null,
      database: b.database ?? null,
      user: b.user ?? null,
      password: b.password ?? null,
      options: b.options ?? null,
      example: false,
      created_at: now,
      updated_at: now,
    };
    if (!(await ctx.store.putConnection(row, true))) throw new GatewayError('connection_exists', `Connection '${b.name}' already exists`);
    return jsonAnswer(201, connectionDetail(row));
  });

  r.add('GET', '/api/v1/connections/:name', async (ctx, _req, [n]) => jsonAnswer(200, connectionDetail(await mustGet(ctx.store, n))));

  r.add(
    'PATCH',
    '/api/v1/connections/:name',
    async (ctx, req, [n]) => {
      const b = parseBody(patchSchema, readJson(req.body));
      const row = { ...(await mustGet(ctx.store, n)) };
      if (b.db !== undefined) row.db = b.db === 'postgresql' ? 'postgres' : b.db;
      if (b.active !== undefined) row.active = b.active;
      for (const k of ['host', 'port', 'user', 'database', 'options'] as const) {
        if (b[k] !== undefined) (row as Record<string, unknown>)[k] = b[k];
      }
      // Sending the mask back (or no password) keeps the stored one.
      if (b.password !== undefined && b.password !== MASK) row.password = b.password;
      row.updated_at = localTimestamp();
      await ctx.store.putConnection(row, false);
      return jsonAnswer(200, connectionDetail(row));
    },
    connectionChanged,
  );

  r.add(
    'DELETE',
    '/api/v1/connections/:name',
    async (ctx, req, [n]) => {
      const b = parseBody(deleteSchema, readJson(req.body, false));
      if (!b.reason?.trim()) throw new GatewayError('reason_required', 'Deleting a connection needs a "reason"');
      if (!(await ctx.store.deleteConnection(n))) throw new GatewayError('connection_not_found', `Connection '${n}' not found`);
      return jsonAnswer(204, null);
    },
    connectionChanged,
  );
}

/** A changed or deleted connection: executors also replace its pools. */
const connectionChanged: ChangeOf = ([name]) => ({ kind: 'connection', name });

async function mustGet(store: import('../store/store.js').Store, n: string): Promise<ConnectionRow> {
  const c = await store.getConnection(n);
  if (!c) throw new GatewayError('connection_not_found', `Connection '${n}' not found`);
  return c;
}
