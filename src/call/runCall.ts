// In charge of one saved-query call end to end: the only place that sequences the stages, each a
// function of its own that hands the next plain values:
//   request (parse) → identify → limits → resolve and authorize → plan and bind → govern
//   → execute → shape → record
// and the only catch, which turns any failure into an answer (recorded once the call has a target).
// Never imports uWS; runs inline or in an executor.
import { identify } from '../auth/identify.js';
import type { Caller } from '../auth/keys.js';
import { RATE_LIMIT_MESSAGES } from '../auth/rates.js';
import { type ErrorCode, GatewayError } from '../contract/errors.js';
import { type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import { checkConnection, resolveTarget, type Target } from './authorize.js';
import type { CallContext } from './context.js';
import { execute } from './execute.js';
import { governCall } from './govern.js';
import { limitKey } from './limits.js';
import { fillValues, planFor } from './plan.js';
import { record } from './record.js';
import { parseCall, parsePaging } from './request.js';
import { cacheAnswer, cacheKey, etagOf, policyFingerprint, type CachedAnswer } from './resultCache.js';
import { shape } from './shape.js';
import { checkStream, streamCall } from './streamCall.js';

/** Requests rejected by validation are not runs (the contract: they never reached the database). */
const NOT_RECORDED = new Set<ErrorCode>(['param_required', 'param_invalid', 'invalid_paging', 'invalid_timeout']);
const HIDDEN_DETAIL = 'An error occurred while executing the SQL query';

export async function runCall(ctx: CallContext, req: Request): Promise<Answer> {
  let caller: Caller | null = null;
  let limitHeaders: string[] | null = null; // the key's limit headers, on every answer once counted
  let target: Target | null = null; // set once the call is authorized: from then on failures are recorded
  let answer: Answer;
  try {
    const call = parseCall(req);
    // The caller and the query are read in parallel: one store round trip instead of two.
    const [who, query] = await Promise.all([identify(ctx.meta, ctx.adminKey, req.apiKey, req.ip), ctx.meta.query(call.name)]);
    caller = who;
    if (!caller) return finish(errorAnswer('unauthorized', 'Unauthorized', req.requestId), null, '-');
    if (caller.kind === 'key') {
      ctx.runs.noteKeyUse(caller.name); // last_used_at, written by the recorder off the call's path
      if (ctx.limitsReady) {
        await ctx.limitsReady;
        ctx.limitsReady = null;
      }
      const limit = await limitKey(ctx.limits, caller.key, call.name);
      if (limit) {
        limitHeaders = limit.headers;
        if (limit.refused) {
          return finish(
            errorAnswer('rate_limited', RATE_LIMIT_MESSAGES.key, req.requestId, { retry_after: limit.refused.retryAfterS }),
            limitHeaders,
            caller.name,
          );
        }
      }
    }

    target = resolveTarget(query, call, caller);
    const connection = checkConnection(await ctx.meta.connection(target.connectionName), target.connectionName);
    const source = ctx.source(connection);
    const plan = planFor(ctx.plans, target.version, connection.name, source.dialect);
    const bound = plan.bind(call.typed ? { kind: 'json', get: (n) => call.params[n] } : { kind: 'query', get: (n) => call.params[n] as string | undefined });
    const timeout = effectiveTimeout(ctx.config.queryTimeout, call.timeout);
    const governed = await governCall(ctx.governance, plan, caller, target.query.name, connection, source);
    if (call.stream) {
      const port = checkStream(call, plan, req.port);
      answer = await streamCall(ctx, port, call, plan, source, fillValues(plan, bound, 0, 0, false), timeout, governed, target, caller.name, req.requestId);
      return finish(answer, limitHeaders, caller.name);
    }
    const paging = parsePaging(call, ctx.config.maxPageSize);

    // Versions with a cache_ttl answer repeat calls without the database; hits are not runs.
    const ttl = plan.write ? 0 : (target.version.cache_ttl ?? 0);
    let cached: string | null = null;
    if (ttl > 0) {
      cached = cacheKey([
        target.query.name,
        target.version.version,
        target.version.uuid,
        connection.name,
        connection.updated_at,
        bound,
        call.format,
        paging.page,
        paging.pageSize,
        policyFingerprint(caller),
      ]);
      const hit = await ctx.results.get(cached);
      if (hit) {
        ctx.metrics.cacheHits.inc();
        return finish(cacheAnswer(hit, ttl, 'HIT', req.ifNoneMatch), limitHeaders, caller.name);
      }
      ctx.metrics.cacheMisses.inc();
    }

    const counters = ctx.statements(connection.name, source.dialect, caller.name);
    const started = performance.now();
    const values = fillValues(plan, bound, paging.pageSize + 1, (paging.page - 1) * paging.pageSize);
    const text = plan.pageable ? plan.pagedText : plan.text;
    const result = await execute(ctx.metrics.activeQueries, counters, source, text, values, { timeoutMs: timeout * 1000, readOnly: !plan.write });
    const executed = performance.now();
    const shaped = shape(plan, result, paging, governed, call.format);
    const body = typeof shaped.body === 'string' ? shaped.body : await shaped.body; // xlsx renders asynchronously
    const rendered = performance.now();
    counters.rows.inc(shaped.rows);
    ctx.serialization[call.format].observe((rendered - executed) / 1000);
    record(
      ctx.runs,
      target,
      caller.name,
      req.requestId,
      shaped.rows,
      Math.round(executed - started),
      Math.round((rendered - executed) * 10) / 10,
      governed.masked,
      null,
    );
    answer = { status: 200, headers: shaped.headers, body };
    if (cached) {
      const entry: CachedAnswer = { body: answer.body, headers: answer.headers, etag: etagOf(answer.body) };
      ctx.results.set(cached, entry, ttl);
      answer = cacheAnswer(entry, ttl, 'MISS', req.ifNoneMatch);
    }
  } catch (e) {
    answer = failure(ctx, req, e, caller, target);
  }
  return finish(answer, limitHeaders, caller?.name ?? '-');
}

/** Every answer carries the key's limit headers and, for the request metrics, the caller's name. */
function finish(answer: Answer, limitHeaders: string[] | null, key: string): Answer {
  if (limitHeaders) answer.headers.push(...limitHeaders); // answers' header lists are never shared
  answer.key = key;
  return answer;
}

/**
 * The one catch: an error answer, recorded when the call had a target and got past validation.
 * Expected failures (a GatewayError: a refusal, a database down or slow, the store unavailable) are
 * answered with their code and not logged; anything else is a bug, logged with its stack as a 500.
 */
function failure(ctx: CallContext, req: Request, e: unknown, caller: Caller | null, target: Target | null): Answer {
  const err = e instanceof GatewayError ? e : null;
  if (!err) console.error(`[${req.requestId}] internal error in ${req.url}:`, e);
  const code: ErrorCode = err ? err.code : 'internal_error';
  let message = err ? err.message : 'An error occurred';
  let extras = err?.extras;
  // Only an administrator sees the database's own error text (a caller not yet identified does not).
  if (extras?.detail !== undefined && (caller === null || caller.kind === 'key')) {
    const { detail: _hidden, ...rest } = extras;
    extras = rest;
    if (code === 'query_failed') message = HIDDEN_DETAIL;
  }
  if (target && caller && !NOT_RECORDED.has(code)) {
    record(ctx.runs, target, caller.name, req.requestId, null, null, null, null, { code, message });
  }
  const answer = errorAnswer(code, message, req.requestId, extras);
  // A store that cannot be reached just now (503 unavailable) says when to try again.
  if (extras?.retry_after !== undefined && code === 'unavailable') answer.headers.push('Retry-After', String(extras.retry_after));
  return answer;
}

/** A request may lower QUERYAPIGATE_QUERY_TIMEOUT, never raise it; 0 means no limit. */
function effectiveTimeout(server: number, requested: number | null): number {
  if (requested === null) return server;
  return server === 0 ? requested : Math.min(server, requested);
}
