// In charge of /api/v1/queries: saved queries and their versions (create, list, get, add a version,
// validate, publish, unpublish, delete) and a query's run history. A version is checked when saved
// (queryChecks.ts: its connection, its SQL, its parameters), so a call can trust it.
import { randomUUID } from 'node:crypto';
import * as v from 'valibot';
import type { Caller } from '../auth/keys.js';
import { GatewayError } from '../contract/errors.js';
import { toPublicRule } from '../call/paramRules.js';
import type { ParamRule } from '../call/paramValues.js';
import { scanStatement, type SqlDialect } from '../governance/analysis.js';
import { scanMarkers } from '../governance/markers.js';
import { jsonAnswer } from '../contract/exchange.js';
import { localTimestamp } from '../store/store.js';
import type { QueryRow, VersionFields, VersionRow } from '../store/types.js';
import { historyPage } from './history.js';
import { checkVersion, dialectOf, type Finding, refusal } from './queryChecks.js';
import { type ApiRouter, type ControlContext, NOTHING_CHANGED } from './routes.js';
import { bodyProblems, checkName, collectionName, NAME, name, optionalText, parseBody, readJson, unknownFields } from './validate.js';

const versionEntries = {
  description: v.pipe(v.string('must be text'), v.minLength(1, 'is required')),
  author: optionalText,
  tags: v.optional(v.array(v.string('must be text'), 'must be a list of text')),
  query_type: v.optional(v.literal('sql', 'only "sql" is supported')),
  sql: v.pipe(v.string('must be text'), v.trim(), v.minLength(1, 'is required')),
  connection_name: optionalText,
  parameters: v.optional(v.nullable(v.record(v.string(), v.unknown(), 'must be an object'))),
  cache_ttl: v.optional(v.nullable(v.pipe(v.number('must be a number'), v.integer('must be an integer'), v.minValue(0)))),
  publish: v.optional(v.boolean('must be true or false')),
};
const versionSchema = v.object(versionEntries);
const collection = v.optional(v.nullable(collectionName));
const createSchema = v.object({ name, collection, ...versionEntries });
const moveSchema = v.object({ collection: v.nullable(collectionName) });
/** A version, or a create body as it is (its name says which query's next version it would be). */
const validateSchema = v.object({ name: v.optional(name), collection: optionalText, ...versionEntries });
const cacheTtlSchema = v.object({ cache_ttl: v.nullable(v.pipe(v.number('must be a number'), v.integer('must be an integer'), v.minValue(0))) });
const publishSchema = v.object({ version: v.pipe(v.number('must be a number'), v.integer('must be an integer'), v.minValue(1)) });

type VersionInput = v.InferOutput<typeof versionSchema>;

/** The version as stored, once every check holds (the first that does not is the answer). */
async function acceptedVersion(
  ctx: ControlContext,
  b: VersionInput,
  connectionName: string | null,
  author: string | null,
): Promise<VersionFields & { uuid: string }> {
  const checked = await checkVersion(ctx, { sql: b.sql, connection_name: connectionName, parameters: b.parameters });
  if (checked.findings.length) throw refusal(checked.findings[0]);
  return {
    uuid: randomUUID(),
    sql: b.sql,
    connection_name: connectionName,
    parameters: checked.rules,
    description: b.description,
    author: b.author ?? author,
    tags: b.tags ?? [],
    cache_ttl: b.cache_ttl ?? null,
  };
}

/** Each connection's dialect, for reading versions' SQL as their connections do. */
type Dialects = Map<string, SqlDialect>;

async function dialects(ctx: ControlContext): Promise<Dialects> {
  const out: Dialects = new Map();
  for (const c of await ctx.store.listConnections()) {
    const d = dialectOf(c.db);
    if (d) out.set(c.name, d);
  }
  return out;
}

/** Whether the statement writes, read in its connection's dialect (in any dialect when it has none). */
function writes(sql: string, dialect: SqlDialect | undefined): boolean {
  return (dialect ? [dialect] : (['postgres', 'mysql', 'sqlite'] as const)).some((d) => {
    const scan = scanStatement(sql, d);
    return scan.writeVerbs.length > 0 || scan.selectInto;
  });
}

function status(q: QueryRow, ver: VersionRow): 'published' | 'previous' | 'draft' {
  if (q.published_version === ver.version) return 'published';
  return ver.was_published ? 'previous' : 'draft';
}

function versionView(q: QueryRow, ver: VersionRow, known: Dialects, runCount?: number) {
  const dialect = ver.connection_name === null ? undefined : known.get(ver.connection_name);
  const params: Record<string, unknown> = {};
  for (const [k, rule] of Object.entries(ver.parameters)) params[k] = toPublicRule(rule as ParamRule);
  return {
    version: ver.version,
    status: status(q, ver),
    uuid: ver.uuid,
    author: ver.author,
    description: ver.description,
    tags: ver.tags,
    query_type: 'sql',
    sql: ver.sql,
    connection_name: ver.connection_name,
    parameters: params,
    placeholders: scanMarkers(ver.sql, dialect).placeholders,
    writes: writes(ver.sql, dialect),
    cache_ttl: ver.cache_ttl,
    created_at: ver.created_at,
    last_modified_at: ver.last_modified_at,
    ...(runCount === undefined ? {} : { run_count: runCount }),
  };
}

function summary(q: QueryRow) {
  const shown = q.versions.find((x) => x.version === q.published_version) ?? q.versions[q.versions.length - 1];
  return {
    name: q.name,
    description: shown?.description ?? null,
    query_type: 'sql',
    connection_name: shown?.connection_name ?? null,
    collection: q.collection,
    tags: shown?.tags ?? [],
    published_version: q.published_version,
    latest_version: q.versions.length ? q.versions[q.versions.length - 1].version : null,
    has_draft: q.versions.some((x) => status(q, x) === 'draft'),
    version_count: q.versions.length,
    example: q.example,
    endpoint: `/q/${q.name}`,
    created_at: q.created_at,
    updated_at: q.updated_at,
    cache_ttl: shown?.cache_ttl ?? null,
  };
}

async function detail(ctx: ControlContext, n: string) {
  const q = await mustGet(ctx, n);
  const counts = await ctx.store.runCounts(n);
  const known = await dialects(ctx);
  return { ...summary(q), versions: q.versions.map((x) => versionView(q, x, known, counts.get(x.version) ?? 0)) };
}

/**
 * What a save of this body would meet, without saving: every problem (the body's fields, the
 * connection, the SQL, the parameters), and what the SQL was read as. A body naming an existing
 * query is read as its next version (keeping its connection unless it names one).
 */
async function validation(ctx: ControlContext, body: Record<string, unknown>) {
  const findings: Finding[] = unknownFields(validateSchema, body).map((f) => ({ code: 'unknown_field', field: f, message: `Unknown field: ${f}` }));
  const parsed = v.safeParse(validateSchema, body);
  if (!parsed.success) {
    for (const p of bodyProblems(parsed.issues)) findings.push({ code: 'invalid_body', field: p.field, message: `${p.field} ${p.problem}` });
  }
  const text = (x: unknown) => (typeof x === 'string' ? x : null);
  const queryName = text(body.name);
  // The schema checks a name's characters; a save also refuses one that starts with '.' (checkName).
  if (queryName !== null && NAME.test(queryName) && queryName.startsWith('.')) {
    findings.push({ code: 'invalid_name', field: 'name', message: `Invalid name '${queryName}'` });
  }
  const existing = queryName === null ? null : await ctx.store.getQuery(queryName);
  const connectionName = body.connection_name === undefined && existing ? lastConnection(existing) : text(body.connection_name);
  const sql = text(body.sql)?.trim() ?? '';
  const parameters = body.parameters !== null && typeof body.parameters === 'object' && !Array.isArray(body.parameters) ? body.parameters : undefined;
  const checked = sql ? await checkVersion(ctx, { sql, connection_name: connectionName, parameters }) : null;
  if (checked) findings.push(...checked.findings);
  const publicRules: Record<string, unknown> = {};
  for (const [k, rule] of Object.entries(checked?.rules ?? {})) publicRules[k] = toPublicRule(rule);
  return {
    valid: findings.length === 0,
    errors: findings.map((f) => ({
      code: f.code,
      field: f.field,
      message: f.message,
      ...(f.errors ? { parameters: f.errors } : {}),
      ...(f.detail === undefined ? {} : { detail: f.detail }),
    })),
    connection_name: connectionName,
    dialect: checked?.dialect ?? null,
    placeholders: checked?.placeholders ?? [],
    parameters: publicRules,
    writes: checked?.writes ?? false,
    tables: checked?.tables ?? null,
    analysed: checked ? checked.tables !== null : false,
    analysis_problem: checked?.unanalysed ?? null,
  };
}

/** A version's default author: the administrator who saved it ('admin' for the shared key; none in open mode). */
function authorOf(apiKey: string, who: Caller | undefined): string | null {
  return who?.admin?.name ?? (apiKey ? 'admin' : null);
}

function lastConnection(q: QueryRow): string | null {
  return q.versions[q.versions.length - 1]?.connection_name ?? null;
}

async function mustGet(ctx: ControlContext, n: string): Promise<QueryRow> {
  const q = await ctx.store.getQuery(n);
  if (!q) throw new GatewayError('query_not_found', `Saved query '${n}' not found`);
  return q;
}

export function queryRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/queries', async (ctx, req) => {
    const args = new URLSearchParams(req.query);
    let items = (await ctx.store.listQueries()).map(summary);
    const search = args.get('search')?.toLowerCase();
    if (search) items = items.filter((q) => q.name.toLowerCase().includes(search) || (q.description ?? '').toLowerCase().includes(search));
    const connection = args.get('connection');
    if (connection) items = items.filter((q) => q.connection_name === connection);
    const collection = args.get('collection');
    if (collection) items = items.filter((q) => q.collection === collection);
    const st = args.get('status');
    if (st === 'published') items = items.filter((q) => q.published_version !== null);
    else if (st === 'unpublished') items = items.filter((q) => q.published_version === null);
    else if (st === 'draft') items = items.filter((q) => q.has_draft);
    else if (st) throw new GatewayError('invalid_filter', 'status must be published, unpublished or draft');
    return jsonAnswer(200, { items });
  });

  r.add('POST', '/api/v1/queries', async (ctx, req, _p, who) => {
    const b = parseBody(createSchema, readJson(req.body));
    checkName(b.name);
    const fields = await acceptedVersion(ctx, b, b.connection_name ?? null, authorOf(req.apiKey, who));
    const ok = await ctx.store.createQuery({ name: b.name, collection: b.collection ?? null, example: false }, fields, b.publish ?? false, localTimestamp());
    if (!ok) throw new GatewayError('query_exists', `Saved query '${b.name}' already exists`);
    return jsonAnswer(201, await detail(ctx, b.name));
  });

  r.add('POST', '/api/v1/queries/validate', async (ctx, req) => jsonAnswer(200, await validation(ctx, readJson(req.body))), NOTHING_CHANGED);

  r.add('GET', '/api/v1/queries/:name', async (ctx, _req, [n]) => jsonAnswer(200, await detail(ctx, n)));

  // Moving a query in or out of a collection changes, at once, which keys reach it through a collections grant.
  r.add('PATCH', '/api/v1/queries/:name', async (ctx, req, [n]) => {
    const b = parseBody(moveSchema, readJson(req.body));
    if (!(await ctx.store.setCollection(n, b.collection, localTimestamp()))) throw new GatewayError('query_not_found', `Saved query '${n}' not found`);
    return jsonAnswer(200, await detail(ctx, n));
  });

  r.add('DELETE', '/api/v1/queries/:name', async (ctx, _req, [n]) => {
    if (!(await ctx.store.deleteQuery(n))) throw new GatewayError('query_not_found', `Saved query '${n}' not found`);
    return jsonAnswer(204, null);
  });

  r.add('POST', '/api/v1/queries/:name/versions', async (ctx, req, [n], who) => {
    const b = parseBody(versionSchema, readJson(req.body));
    // A new version keeps the connection of the version before it unless it names another.
    const q = await mustGet(ctx, n);
    const connectionName = b.connection_name === undefined ? lastConnection(q) : b.connection_name;
    const fields = await acceptedVersion(ctx, b, connectionName, authorOf(req.apiKey, who));
    if ((await ctx.store.addVersion(n, fields, b.publish ?? false, localTimestamp())) === null) {
      throw new GatewayError('query_not_found', `Saved query '${n}' not found`);
    }
    return jsonAnswer(201, await detail(ctx, n));
  });

  r.add('GET', '/api/v1/queries/:name/versions/:version', async (ctx, _req, [n, ver]) => {
    const q = await mustGet(ctx, n);
    const found = q.versions.find((x) => String(x.version) === ver);
    if (!found) throw new GatewayError('version_not_found', `Version ${ver} not found`);
    return jsonAnswer(200, versionView(q, found, await dialects(ctx), (await ctx.store.runCounts(n)).get(found.version) ?? 0));
  });

  r.add('PATCH', '/api/v1/queries/:name/versions/:version', async (ctx, req, [n, ver]) => {
    const b = parseBody(cacheTtlSchema, readJson(req.body));
    if (!/^\d+$/.test(ver) || !(await ctx.store.setCacheTtl(n, Number(ver), b.cache_ttl || null, localTimestamp()))) {
      await mustGet(ctx, n);
      throw new GatewayError('version_not_found', `Version ${ver} not found`);
    }
    return jsonAnswer(200, await detail(ctx, n));
  });

  r.add('POST', '/api/v1/queries/:name/publish', async (ctx, req, [n]) => {
    const b = parseBody(publishSchema, readJson(req.body));
    const q = await mustGet(ctx, n);
    if (!q.versions.some((x) => x.version === b.version)) throw new GatewayError('version_not_found', `Version ${b.version} not found`);
    await ctx.store.setPublished(n, b.version, localTimestamp());
    return jsonAnswer(200, await detail(ctx, n));
  });

  r.add('POST', '/api/v1/queries/:name/unpublish', async (ctx, _req, [n]) => {
    if (!(await ctx.store.setPublished(n, null, localTimestamp()))) throw new GatewayError('query_not_found', `Saved query '${n}' not found`);
    return jsonAnswer(200, await detail(ctx, n));
  });

  r.add('GET', '/api/v1/queries/:name/history', async (ctx, req, [n]) => {
    await mustGet(ctx, n);
    return jsonAnswer(200, await historyPage(ctx, req.query, { query: n, defaultLimit: 50 }));
  });
}
