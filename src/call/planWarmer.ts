// In charge of having each published version ready before its first call: its plan, and the rows a
// call reads. A plan is the statement parsed and analysed, its markers made positional and its
// binder compiled: 0.5-5 ms for the seeds' statements, which the first call would otherwise wait
// for. Plans are made when the executor starts and after each change, off the calls' path: one
// statement per turn of the event loop (calls go between them), never more than the plan cache
// holds. The SQL parser of each dialect the connections use is loaded the same way, so a dialect
// nobody uses never costs memory. The keys, queries and connections read for this fill the metadata
// cache a change has just cleared, so the calls after it find their rows (no store round trip each).
// Last, each active PostgreSQL or MySQL connection a published query uses is made ready: a connection
// opened (Source.warm), the schema governance reads (on PostgreSQL the function catalog alone is
// ~25 ms of the process's very first call, measured), and the statements just planned described on
// its open connections (Source.prepare), and the governance of the keys with rules that may call them
// decided (their mask traces), so no call waits for them.
import type { LRUCache } from 'lru-cache';
import { type SqlDialect, warmParser } from '../governance/analysis.js';
import type { Metadata } from '../store/metadata.js';
import type { Caller } from '../auth/keys.js';
import type { ConnectionRow, KeyRow, QueryRow } from '../store/types.js';
import type { Source } from '../sources/types.js';
import type { Store } from '../store/store.js';
import { authorizeCall } from './authorize.js';
import { type Governance, governCall } from './govern.js';
import { type CallPlan, planFor, planKey } from './plan.js';
import { policyFingerprint } from './resultCache.js';

/** The analysis dialect of each connection type (sources/index.ts opens the same names). */
export const PARSED_AS: Record<string, SqlDialect> = { postgres: 'postgres', postgresql: 'postgres', sqlite: 'sqlite', mysql: 'mysql' };

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A plan made in this pass, and the query whose published version it is. */
export interface FreshPlan {
  plan: CallPlan;
  query: QueryRow;
}

export interface PlanWarmer {
  /** Plans what is published and not planned yet; a call while it runs makes it run once more after. */
  warm(): void;
  /** Resolves when no warming is running (tests, shutdown). */
  idle(): Promise<void>;
  close(): void;
}

export function planWarmer(
  store: Pick<Store, 'listConnections' | 'listQueries' | 'listKeysByHash'>,
  plans: LRUCache<string, CallPlan>,
  meta: Pick<Metadata, 'mark' | 'fill'>,
  /**
   * Makes a connection ready ahead of its first call: a connection opened, its schema read, `fresh`
   * (planned just now) described and governed for `keys` (every stored key, as the pass read them).
   */
  readySource: (connection: ConnectionRow, fresh: FreshPlan[], keys: KeyRow[]) => void = () => undefined,
): PlanWarmer {
  const parsed = new Set<SqlDialect>();
  let running: Promise<void> | null = null;
  let again = false;
  let closed = false;

  async function once(): Promise<void> {
    const mark = meta.mark();
    const [connections, queries, keys] = await Promise.all([store.listConnections(), store.listQueries(), store.listKeysByHash()]);
    meta.fill(mark, { keys, queries, connections });
    const dialects = new Map<string, SqlDialect>();
    for (const c of connections) {
      const dialect = PARSED_AS[c.db];
      if (!dialect) continue;
      dialects.set(c.name, dialect);
      if (!parsed.has(dialect)) {
        parsed.add(dialect);
        await nextTurn();
        warmParser(dialect);
      }
    }
    const used = new Set<string>();
    /** The plans made in this pass, by connection. */
    const fresh = new Map<string, FreshPlan[]>();
    for (const q of queries) {
      const version = q.versions.find((v) => v.version === q.published_version);
      const connection = version?.connection_name;
      const dialect = connection ? dialects.get(connection) : undefined;
      if (connection && dialect) used.add(connection);
      if (!version || !connection || !dialect || plans.has(planKey(version, connection, dialect))) continue;
      if (closed || plans.size >= plans.max) return;
      await nextTurn();
      try {
        const made = { plan: planFor(plans, version, connection, dialect), query: q };
        const list = fresh.get(connection);
        if (list) list.push(made);
        else fresh.set(connection, [made]);
      } catch {
        // A statement that cannot be planned is not cached: its calls raise the error themselves.
      }
    }
    // Pooled sources only: a SQLite file is opened by its first call.
    const keyRows = keys.map(([, key]) => key);
    for (const c of connections) {
      if (closed || !c.active || !used.has(c.name) || dialects.get(c.name) === 'sqlite') continue;
      try {
        readySource(c, fresh.get(c.name) ?? [], keyRows);
      } catch {
        // A source that cannot be opened is the first call's to report.
      }
    }
  }

  function warm(): void {
    if (closed) return;
    if (running) {
      again = true;
      return;
    }
    running = once()
      .catch(() => undefined) // the store not answering yet: the first calls plan what they need
      .finally(() => {
        running = null;
        if (again) {
          again = false;
          warm();
        }
      });
  }

  return {
    warm,
    idle: async () => {
      while (running) await running;
    },
    close() {
      closed = true;
    },
  };
}

/**
 * Decides ahead, for statements just planned (the plan warmer asks, once their connection's schema is
 * read), the governance of the stored keys with rules (allowed tables, masks) that may call them: each
 * policy's mask trace is cached as a call would cache it, so the first governed call finds it (tracing
 * the TPC-C order_status for a key with a hash and a mask was a good part of its first call's cost).
 * One trace per plan and policy, at most `max`; a turn of the event loop between them, so calls go
 * between. A refusal is not kept: the call meets it.
 */
export async function governAhead(g: Governance, fresh: FreshPlan[], keys: KeyRow[], connection: ConnectionRow, source: Source, max: number): Promise<void> {
  const callers: Array<Caller & { kind: 'key' }> = [];
  for (const key of keys) if (key.active && (key.mask?.length || key.allowed_tables)) callers.push({ kind: 'key', name: key.name, key });
  if (callers.length === 0) return;
  let left = max;
  for (const { plan, query } of fresh) {
    // A turn between statements too: with many keys, finding who may call one is itself some work.
    await nextTurn();
    const traced = new Set<string>();
    for (const caller of callers) {
      const policy = policyFingerprint(caller);
      if (traced.has(policy) || !mayCall(caller, query, connection.name)) continue;
      if (left-- <= 0) return;
      traced.add(policy);
      await nextTurn();
      try {
        await governCall(g, plan, caller, query.name, connection, source);
      } catch {
        // refused: thrown again by the call itself
      }
    }
  }
}

function mayCall(caller: Caller, query: QueryRow, connection: string): boolean {
  try {
    authorizeCall(caller, query.name, connection, connection, query.collection);
    return true;
  } catch {
    return false;
  }
}
