// In charge of the stages every statement call shares once it knows what it runs (a saved version or
// an ad-hoc statement, planned and bound): govern → (stream) → paging → cached answer → execute →
// shape → record; and of the one way a failure becomes an answer (recorded once the call had a
// target). /q/, /execute_sql and MCP's tools all come through here, so none can skip a check.
import type { MessagePort } from 'node:worker_threads';
import { type Caller, metricKey } from '../auth/keys.js';
import { AddressNeeded, type ErrorCode, GatewayError } from '../contract/errors.js';
import { type Answer, errorAnswer } from '../contract/exchange.js';
import { logger } from '../log.js';
import type { Source } from '../sources/types.js';
import type { ConnectionRow } from '../store/types.js';
import type { CallContext } from './context.js';
import { execute } from './execute.js';
import { governCall, mayWrite, selectsWrite } from './govern.js';
import { type CallPlan, fillValues, namedParamError, pagedStatement } from './plan.js';
import { record, type RunTarget, type Transport } from './record.js';
import { type CallRequest, type Paging, parsePaging } from './request.js';
import { cacheAnswer, cacheKey, type CachedAnswer, etagOf, policyFingerprint } from './resultCache.js';
import { shape } from './shape.js';
import { checkStream, streamCall } from './streamCall.js';

/** A statement ready to govern: its plan, the caller's values bound, where it runs, what its run is of. */
export interface StatementCall {
  plan: CallPlan;
  bound: unknown[];
  connection: ConnectionRow;
  source: Source;
  run: RunTarget;
  /** The saved query's name (per-query write grants), or null for ad-hoc SQL. */
  queryName: string | null;
  /** A stream's file name, without the format. */
  fileName: string;
  /** A version's cache_ttl, what identifies it in the cache key, and its number (the entry's meta); null: never cached. */
  cache: { ttl: number; id: unknown[]; version: number } | null;
}

/** How the entry point holds the call: its transport, read-only (MCP), a fixed row cap instead of paging. */
export interface CallOptions {
  transport: Transport;
  readOnly: boolean;
  requestId: string;
  ifNoneMatch: string;
  /** A stream's port (?stream=true over REST). */
  port?: MessagePort;
  /** MCP: at most this many rows, the first page; the answer's X-Has-More says whether more were cut. */
  rowCap?: number;
}

export function restOptions(req: { requestId: string; ifNoneMatch: string; port?: MessagePort }): CallOptions {
  return { transport: 'rest', readOnly: false, requestId: req.requestId, ifNoneMatch: req.ifNoneMatch, port: req.port };
}

const READ_ONLY = { readOnly: true };
const AS_GRANTED = { readOnly: false };

export async function runStatement(ctx: CallContext, caller: Caller, call: CallRequest, s: StatementCall, o: CallOptions): Promise<Answer> {
  const { plan, bound, connection, source, run } = s;
  const timeout = effectiveTimeout(ctx.config.queryTimeout, call.timeout);
  let governed = governCall(ctx.governance, plan, caller, s.queryName, connection, source, o.readOnly ? READ_ONLY : AS_GRANTED);
  if (governed instanceof Promise) governed = await governed;
  if (call.stream) {
    const port = checkStream(call, plan, o.port);
    return streamCall(ctx, port, call, plan, source, fillValues(plan, bound, 0, 0, false), timeout, governed, run, s.fileName, caller.name, o.requestId);
  }
  const paging: Paging = o.rowCap ? { page: 1, pageSize: o.rowCap } : parsePaging(call, ctx.config.maxPageSize);

  // Versions with a cache_ttl answer repeat calls without the database; hits are not runs.
  const ttl = plan.write || !s.cache ? 0 : s.cache.ttl;
  let cached: string | null = null;
  /** Hands the calls that wait for this one's run (call/resultCache.ts RunningAnswers) its entry, once. */
  let made: ((entry: CachedAnswer | null) => void) | null = null;
  if (ttl > 0 && s.cache) {
    cached = cacheKey([...s.cache.id, connection.name, connection.updated_at, bound, call.format, paging.page, paging.pageSize, policyFingerprint(caller)]);
    const hit = (await ctx.results.get(cached)) ?? (await ctx.cacheRuns.joined(cached));
    if (hit) {
      ctx.metrics.cacheHits.inc();
      return cacheAnswer(hit, ttl, 'HIT', o.ifNoneMatch);
    }
    ctx.metrics.cacheMisses.inc();
    made = ctx.cacheRuns.lead(cached);
  }

  try {
    const counters = ctx.statements(connection.name, source.dialect, metricKey(caller));
    const started = performance.now();
    const offset = (paging.page - 1) * paging.pageSize;
    const values = fillValues(plan, bound, paging.pageSize + 1, offset);
    const text = pagedStatement(plan, offset);
    // The database refuses writes too unless this caller may write (governance already refused them); a SELECT
    // runs read-write only for a writer nothing bounds (govern.ts selectsWrite).
    const readOnly = o.readOnly || !mayWrite(caller, s.queryName, ctx.config.allowWrites) || (!plan.write && !selectsWrite(caller));
    let result: Awaited<ReturnType<typeof execute>>;
    try {
      result = await execute(ctx.metrics.activeQueries, counters, source, text, values, {
        timeoutMs: timeout * 1000,
        readOnly,
        resetSession: governed.resetSession === true,
      });
    } catch (e) {
      throw namedParamError(plan, e); // a value PostgreSQL could not read as its parameter's type: 400, naming it
    }
    const executed = performance.now();
    const shaped = shape(plan, result, paging, governed, call.format, ctx.config.maxAnswerBytes);
    const body = typeof shaped.body === 'string' ? shaped.body : await shaped.body; // xlsx renders asynchronously
    const rendered = performance.now();
    counters.rows.inc(shaped.rows);
    ctx.serialization[call.format].observe((rendered - executed) / 1000);
    record(
      ctx.runs,
      run,
      caller.name,
      o.requestId,
      shaped.rows,
      Math.round(executed - started),
      Math.round((rendered - executed) * 10) / 10,
      governed.masked,
      null,
    );
    let answer: Answer = { status: 200, headers: shaped.headers, body };
    if (cached) {
      const meta = { name: s.queryName ?? '', version: s.cache?.version ?? 0, connection: connection.name, format: call.format, page: paging.page };
      const entry: CachedAnswer = { body: answer.body, headers: answer.headers, etag: etagOf(answer.body), meta };
      ctx.results.set(cached, entry, ttl);
      made?.(entry);
      answer = cacheAnswer(entry, ttl, 'MISS', o.ifNoneMatch);
    }
    return answer;
  } finally {
    made?.(null); // a run that failed: the calls waiting for it run the statement themselves
  }
}

/** Requests rejected by validation are not runs (the contract: they never reached the database). */
const NOT_RECORDED = new Set<ErrorCode>(['param_required', 'param_invalid', 'invalid_paging', 'invalid_timeout']);
const HIDDEN_DETAIL = 'An error occurred while executing the SQL query';

/**
 * The one way a failure becomes an answer: recorded when the call had a target and got past
 * validation. Expected failures (a GatewayError: a refusal, a database down or slow, the store
 * unavailable) are answered with their code and not logged; anything else is a bug, logged with its
 * stack as a 500. The database's own text (`detail`) goes to administrators, and to whoever wrote the
 * SQL (`keepDetail`: ad-hoc calls) unless their key masks columns. A call that crossed without the
 * address a rule needs is not a failure: its answer asks the acceptor to send it again with the
 * address (nothing was counted yet).
 */
export function failure(
  ctx: CallContext,
  requestId: string,
  url: string,
  e: unknown,
  caller: Caller | null,
  run: RunTarget | null,
  keepDetail = false,
): Answer {
  if (e instanceof AddressNeeded) return { status: 0, headers: [], body: '', addressNeeded: true };
  const err = e instanceof GatewayError ? e : null;
  if (!err) logger('call').error({ request_id: requestId, key: caller?.name ?? '-', route: url, err: e }, 'internal error');
  const code: ErrorCode = err ? err.code : 'internal_error';
  let message = err ? err.message : 'An error occurred';
  let extras = err?.extras;
  // Only an administrator sees the database's own error text (a caller not yet identified does not), and the author of
  // ad-hoc SQL whose key masks nothing: the text may quote any value the statement touched, masked ones too
  // (PostgreSQL's `invalid input syntax for type integer: "<the value>"`, MariaDB's EXTRACTVALUE errors).
  if (extras?.detail !== undefined && (caller === null || (caller.kind === 'key' && (!keepDetail || !!caller.key.mask?.length)))) {
    const { detail: _hidden, ...rest } = extras;
    extras = rest;
    if (code === 'query_failed') message = HIDDEN_DETAIL;
  }
  if (run && caller && !NOT_RECORDED.has(code)) {
    record(ctx.runs, run, caller.name, requestId, null, null, null, null, { code, message });
  }
  const answer = errorAnswer(code, message, requestId, extras);
  // A store that cannot be reached just now (503 unavailable) says when to try again.
  if (extras?.retry_after !== undefined && code === 'unavailable') answer.headers.push('Retry-After', String(extras.retry_after));
  return answer;
}

/** A request may lower QUERYAPIGATE_QUERY_TIMEOUT, never raise it; 0 means no limit. */
function effectiveTimeout(server: number, requested: number | null): number {
  if (requested === null) return server;
  return server === 0 ? requested : Math.min(server, requested);
}
