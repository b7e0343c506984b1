// In charge of what the catalog says of one reachable saved query, read the way a call reads it: its
// parameters as the binder enforces them, the plan's reading of the statement (does it write), the
// governance stage's verdict for this caller (refused? which columns masked?) and its output columns
// typed from the connection's schema. Runs in an executor, on the executor's own plan and schema caches.
import type { Caller } from '../auth/keys.js';
import { checkConnection } from '../call/authorize.js';
import { readRule } from '../call/binder.js';
import type { CallContext } from '../call/context.js';
import { governCall, mayWrite } from '../call/govern.js';
import type { ParamRule } from '../call/paramValues.js';
import { planFor, type CallPlan } from '../call/plan.js';
import type { KnownSchema } from '../call/schemaCache.js';
import { emptySchema } from '../governance/names.js';
import { GatewayError } from '../contract/errors.js';
import type { Dialect, Source } from '../sources/types.js';
import type { ConnectionRow } from '../store/types.js';
import { type CatalogColumn, outputColumns } from './columns.js';
import type { ReachableQuery } from './reach.js';

export interface QueryFacts {
  name: string;
  version: number;
  published: boolean;
  description: string;
  tags: string[];
  collection: string | null;
  /** The saved connection (null: every call names one). */
  connection: string | null;
  /** The connections this caller may run it on. */
  connections: string[];
  /** In the binder's order: declared parameters the SQL uses, then undeclared ones (rule null: required, untyped). */
  parameters: Array<{ name: string; rule: ParamRule | null }>;
  cacheTtl: number | null;
  /** The plan's reading; null when the statement can't be planned. */
  writes: boolean | null;
  /** Whether this caller may run it when it writes (the server's ceiling and the key's grants). */
  canWrite: boolean;
  columns: CatalogColumn[] | null;
  /** Output columns this caller gets masked (keys with mask rules). */
  masked: Array<{ column: string; action: string }> | null;
  /** Why a call would be refused before reaching the database, when it would be. */
  refused: { code: string; message: string } | null;
}

/** How long a catalog waits for a connection's schema before it answers with untyped columns. */
const SCHEMA_WAIT_MS = 2000;

/** A connection as the catalog reads it: its row, dialect, source and schema (each read once per build). */
export interface Reading {
  conn: ConnectionRow;
  dialect: Dialect | null;
  source: Source | null;
  schema: KnownSchema | null;
  /** Why it can't be used, when it can't. */
  refused: GatewayError | null;
}

/** Opens (or reuses) the connection's source and reads its schema through the executor's cache, within a deadline. */
export async function readConnection(ctx: CallContext, conn: ConnectionRow | undefined, name: string): Promise<Reading | null> {
  try {
    const row = checkConnection(conn ?? null, name);
    const source = ctx.source(row);
    // A schema that can't be read leaves the columns untyped; it does not refuse anything.
    const schema = await within(Promise.resolve(ctx.governance.schemas.get(row, source)), SCHEMA_WAIT_MS).catch(() => null);
    return { conn: row, dialect: source.dialect, source, schema, refused: null };
  } catch (e) {
    if (!(e instanceof GatewayError)) throw e;
    return conn ? { conn, dialect: dialectOf(conn.db), source: null, schema: null, refused: e } : null;
  }
}

export async function describeQuery(ctx: CallContext, caller: Caller, r: ReachableQuery, reading: Reading | null): Promise<QueryFacts> {
  const { query, version } = r;
  const facts: QueryFacts = {
    name: query.name,
    version: version.version,
    published: r.published,
    description: version.description,
    tags: version.tags,
    collection: query.collection,
    connection: version.connection_name,
    connections: r.connections,
    parameters: [],
    cacheTtl: version.cache_ttl,
    writes: null,
    canWrite: mayWrite(caller, query.name, ctx.config.allowWrites),
    columns: null,
    masked: null,
    refused: null,
  };
  let plan: CallPlan | null = null;
  try {
    if (!reading) throw new GatewayError('connection_not_found', `Connection '${r.connections[0]}' not found`);
    if (reading.dialect) plan = planFor(ctx.plans, version, reading.conn.name, reading.dialect);
    if (reading.refused) throw reading.refused;
    if (plan && reading.source) {
      facts.writes = plan.write;
      const governed = await within(Promise.resolve(governCall(ctx.governance, plan, caller, query.name, reading.conn, reading.source)), SCHEMA_WAIT_MS);
      facts.masked = governed?.masked ?? null;
    }
  } catch (e) {
    if (!(e instanceof GatewayError)) throw e;
    facts.refused = { code: e.code, message: e.message };
  }
  if (plan) {
    facts.writes = plan.write;
    if (reading?.dialect) {
      const known = reading.schema;
      facts.columns = outputColumns(plan.inspection.analysis, known?.schema ?? emptySchema(reading.dialect), reading.dialect, plan.text);
    }
  }
  facts.parameters = parametersOf(version.parameters, plan?.params ?? null);
  return facts;
}

/**
 * As the binder reads them: declared rules for names the SQL uses (rule order), then undeclared names
 * (SQL order). A `from_claim` parameter is left out: the caller's token gives it, the caller never does.
 */
function parametersOf(stored: Record<string, unknown> | null, placeholders: string[] | null): QueryFacts['parameters'] {
  const definitions = stored && typeof stored === 'object' ? stored : {};
  const used = placeholders ? new Set(placeholders) : null;
  const out: QueryFacts['parameters'] = [];
  for (const name of Object.keys(definitions)) {
    if (used && !used.has(name)) continue;
    const rule = readRule(definitions[name]);
    if (rule.from_claim === undefined) out.push({ name, rule });
  }
  for (const name of placeholders ?? []) if (!Object.hasOwn(definitions, name) && !out.some((p) => p.name === name)) out.push({ name, rule: null });
  return out;
}

function dialectOf(db: string): Dialect | null {
  if (db === 'postgres' || db === 'postgresql') return 'postgres';
  return db === 'mysql' || db === 'sqlite' ? db : null;
}

/** The value, or null when it takes longer than `ms`: the catalog then says less, never waits long. */
function within<T>(p: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
