// In charge of the governance stage of a call: the caller's grants checked against the plan's
// reading of the statement (read-only, write verbs, tables), and the mask plan for its output
// columns, traced once per statement, rules and schema, then cached. Refusals happen before the
// statement reaches the database.
import type { LRUCache } from 'lru-cache';
import type { Caller } from '../auth/keys.js';
import { GatewayError } from '../contract/errors.js';
import { checkPredicates, checkWrites, compileMasker, planMasks, type MaskPlan, type MaskRule, type Masker } from '../governance/masking.js';
import { allSafe, checkFunctions, opaqueCalls, unsafeCalls } from '../governance/functions.js';
import { resolveTable } from '../governance/names.js';
import { checkOutsideReads, checkStatement, checkTables, governanceError, viewsNamed, writeOpsError } from '../governance/policy.js';
import type { Source } from '../sources/types.js';
import type { ConnectionRow } from '../store/types.js';
import type { CallPlan } from './plan.js';
import { policyFingerprint } from './resultCache.js';
import type { KnownSchema, SchemaCache } from './schemaCache.js';

/** What the stage needs of its executor: the server's write ceiling, schemas, traces, the mask secret. */
export interface Governance {
  allowWrites: boolean;
  /** Each connection's tables and columns, for masking. */
  schemas: SchemaCache;
  /** Mask traces by plan, rules and schema fingerprint. */
  traces: LRUCache<string, Governed>;
  /** The HMAC key for hashed values (QUERYAPIGATE_MASK_KEY or the store's own secret). */
  maskSecret(): Promise<Buffer>;
}

export interface Governed {
  masker: Masker | null;
  masked: MaskPlan['masked'] | null;
  /**
   * The statement may leave state on its session that analysis can't see (a write's triggers, a
   * function the catalog can't vouch for, a view's functions): the source resets the session after it.
   */
  resetSession?: boolean;
}

const UNMASKED: Governed = { masker: null, masked: null };
const UNMASKED_RESET: Governed = { masker: null, masked: null, resetSession: true };
/** No hash action, no secret needed. */
const NO_SECRET = Buffer.alloc(0);

/**
 * Writes need the server's ceiling and the caller's own permission: allow_writes, or for a saved query a
 * per-query grant (`queryName` null is ad-hoc SQL, which no per-query grant reaches).
 */
export function mayWrite(caller: Caller, queryName: string | null, serverAllows: boolean): boolean {
  if (!serverAllows) return false;
  if (caller.kind !== 'key') return true;
  const k = caller.key;
  if (k.allow_writes) return true;
  return queryName !== null && k.queries !== '*' && k.queries.some((g) => typeof g !== 'string' && g.name === queryName && g.allow_writes);
}

/**
 * Whether a statement that does not write (a SELECT) by a caller that may write runs read-write: so that a function it
 * calls may write (`SELECT create_order(5)`, `nextval`), as the contract's runner has it, but only for a caller nothing
 * bounds (no allowed_write_ops, mask or allowed_tables), who may write anything anyway. For a bounded key the read-only
 * session stays behind what governance cannot see in a SELECT: a view's functions, an operator's, a row policy's.
 */
export function selectsWrite(caller: Caller): boolean {
  if (caller.kind !== 'key') return true;
  const k = caller.key;
  return k.allowed_write_ops === null && !k.mask?.length && k.allowed_tables === null;
}

/** How a call is held beyond the caller's grants: MCP and streams never write. */
export interface GovernOptions {
  readOnly?: boolean;
}

/**
 * The call governed: refused (thrown), or how it runs. Decided at once when the connection's schema is
 * cached and the caller's trace is kept (nearly every call), else a promise: a schema to read first, or
 * masks to trace.
 */
export function governCall(
  g: Governance,
  plan: CallPlan,
  caller: Caller,
  queryName: string | null,
  connection: ConnectionRow,
  source: Source,
  options: GovernOptions = {},
): Governed | Promise<Governed> {
  const { scan, analysis } = plan.inspection;
  const key = caller.kind === 'key' ? caller.key : null;
  const writer = !options.readOnly && mayWrite(caller, queryName, g.allowWrites);
  // Ad-hoc SQL from a scoped key is the caller's own text, not an administrator's: a statement the
  // parsers cannot read is refused outright, whatever the key's grants (the keyword guard alone is
  // what saved queries fall back to, and an attacker's text is where it would be tried).
  if (queryName === null && key) {
    if (analysis === null) {
      throw new GatewayError('table_check_failed', `This statement could not be analysed, so it is refused (${plan.inspection.failure ?? 'unreadable'})`);
    }
    checkOutsideReads(analysis);
  }
  checkStatement(scan, { mayWrite: writer, allowedWriteOps: key?.allowed_write_ops ?? null });
  const rules = key?.mask?.length ? key.mask : null;
  const tables = key?.allowed_tables ?? null;
  // PostgreSQL and MySQL sessions are pooled; SQLite runs only statements that return rows, read-only.
  const pooled = source.dialect !== 'sqlite';
  // A write may fire triggers or rules, which can do anything to the session.
  const resetAnyway = pooled && writer && plan.write;
  // On PostgreSQL a call that may not write runs only functions the catalog says cannot change
  // anything; any other call that runs a function the catalog can't vouch for (on MySQL, a stored
  // function), or reads a view (which may call one), has its session reset after it.
  const judgeCalls = pooled && scan.calls.length > 0;
  const readsRelations = pooled && (analysis === null || analysis.tables.length > 0);
  if (!rules && !tables && !judgeCalls && !readsRelations) return resetAnyway ? UNMASKED_RESET : UNMASKED;

  const known = g.schemas.get(connection, source);
  // Once read, the schema is cached: the same checks again, at once.
  if (known instanceof Promise) return known.then(() => governCall(g, plan, caller, queryName, connection, source, options));
  if ((rules || tables) && known.untracedOperators) throw operatorsError(known.untracedOperators, tables !== null);
  const limitedWrites = writer ? (key?.allowed_write_ops ?? null) : null;
  // A write runs code the statement does not show: an operator's function wherever the values' types fit it, a view's
  // functions where it reads one. Either may delete or update: a key limited to some verbs writes through neither (and
  // its SELECTs run read-only, statement.ts). Of a statement the parsers cannot read, every view it names counts.
  if (limitedWrites && plan.write) {
    const unseen = (known.untracedOperators ?? []).map((o) => `operator ${o}`);
    if (analysis !== null) {
      for (const t of analysis.tables) if (!resolveTable(known.schema, t)?.columns) unseen.push(`view ${t}`);
    } else if (scan.unreadable) unseen.push('a statement the gateway cannot read');
    else for (const v of viewsNamed(plan.inspection.words, known.schema)) unseen.push(`view ${v}`);
    if (unseen.length > 0) throw writeOpsError(limitedWrites, unseen);
  }
  let reset = resetAnyway;
  if (judgeCalls && known.functions) {
    // A writer's function could copy a masked value anywhere (an INSERT in its body): a key that masks calls none.
    // So could one that deletes or updates (a user's function, setval) for a key allowed only some writes.
    if (writer && (rules || limitedWrites)) {
      const unsafe = unsafeCalls(scan.calls, known.functions);
      if (unsafe && rules) {
        throw governanceError('mask_write', `This API key masks columns, so it may call only functions that cannot change anything (${unsafe.join(', ')} can)`);
      }
      if (unsafe && limitedWrites) throw writeOpsError(limitedWrites, unsafe);
    }
    if (!writer && source.dialect === 'postgres') checkFunctions(scan.calls, known.functions);
    else if (!reset && !allSafe(scan.calls, known.functions)) reset = true;
    // Rules that follow columns or tables can't follow them into a function's body, which may read any table.
    const opaque = rules || tables ? opaqueCalls(scan.calls, known.functions) : null;
    if (opaque) {
      throw tables
        ? governanceError('table_not_allowed', `This API key may only query the tables it names; ${opaque.join(', ')} may read others.`)
        : governanceError(
            'mask_unresolvable',
            `What ${opaque.join(', ')} answers can't be traced to its source columns (a function's body, which the gateway does not follow, may read any table), so masking rules can't be enforced`,
          );
    }
  }
  if (pooled && !reset && (analysis === null || analysis.tables.some((t) => !resolveTable(known.schema, t)?.columns))) reset = true;
  if (!rules && !tables) return reset ? UNMASKED_RESET : UNMASKED;
  const slot = traceSlot(plan, policyFingerprint(caller), known.fingerprint);
  const traced = g.traces.get(slot);
  if (traced) return reset ? { ...traced, resetSession: true } : traced;
  // Refusals are not kept: thrown each time.
  checkTables(analysis, tables, known.schema);
  const kept = (t: Governed): Governed => {
    g.traces.set(slot, t);
    return reset ? { ...t, resetSession: true } : t;
  };
  return rules ? traceMasks(g, plan, key?.mask_predicates === 'refuse', rules, known, connection).then(kept) : kept(UNMASKED);
}

/** A key whose rules follow tables or columns, on a database whose operators or casts may read any table (functions.ts untracedOperators). */
function operatorsError(operators: string[], tables: boolean): GatewayError {
  const some = operators.slice(0, 3).join(', ');
  const why = `this database defines operators or casts whose function may read any table (${some}), which it runs wherever the values' types fit them`;
  return tables
    ? governanceError('table_not_allowed', `This API key may only query the tables it names, and ${why}.`)
    : governanceError('mask_unresolvable', `This API key masks columns, and ${why}, so masking rules can't be enforced.`);
}

/** Each plan's last trace key, with the two fingerprints it was made of. */
const slots = new WeakMap<CallPlan, { policy: string; schema: string; slot: string }>();

/**
 * The trace cache's key: the plan, the caller's rules as the result cache fingerprints them (tables and masks: one
 * string per key row) and the schema's fingerprint. Kept per plan while its fingerprints stay the same, so nearly every
 * call finds the same string, whose hash V8 keeps: made afresh, each governed call built a string of a hundred
 * characters or more and hashed it, about 0.4 µs against 0.04 (a probe of the two, with lru-cache's get).
 */
function traceSlot(plan: CallPlan, policy: string, schema: string): string {
  const last = slots.get(plan);
  if (last !== undefined && last.policy === policy && last.schema === schema) return last.slot;
  const slot = `${plan.id}\u0000${policy}\u0000${schema}`;
  if (last === undefined) slots.set(plan, { policy, schema, slot });
  else {
    last.policy = policy;
    last.schema = schema;
    last.slot = slot;
  }
  return slot;
}

async function traceMasks(
  g: Governance,
  plan: CallPlan,
  refusePredicates: boolean,
  rules: MaskRule[],
  known: KnownSchema,
  connection: ConnectionRow,
): Promise<Governed> {
  const { analysis } = plan.inspection;
  const maskPlan = planMasks(analysis, known.schema, rules);
  if (refusePredicates) checkPredicates(analysis, known.schema, rules);
  checkWrites(analysis, known.schema, rules);
  // Where `*` was expanded, a masker even when no rule applies now: it checks the result against the
  // schema traced on, so a column added or moved since is refused, not shown (then the schema is read again).
  const stars = maskPlan.expected?.some((name) => name !== null) ?? false;
  if (maskPlan.actions.length === 0 && !stars) return UNMASKED;
  const check = compileMasker(maskPlan, maskPlan.actions.includes('hash') ? await g.maskSecret() : NO_SECRET);
  const masker: Masker = (columns, rows) => {
    try {
      return check(columns, rows);
    } catch (e) {
      g.schemas.clear(connection.name);
      throw e;
    }
  };
  return { masker, masked: maskPlan.masked.length ? maskPlan.masked : null };
}
