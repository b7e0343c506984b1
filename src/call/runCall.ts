// In charge of one saved-query call end to end: the only place that sequences the stages
// (parse → authenticate → resolve → authorize → plan → bind → execute → shape → record) and the
// only catch that turns errors into an answer. Never imports uWS; runs inline or in an executor.
import { ADMIN, OPEN, hashSecret, isAdminKey, keyIsUsable, type Caller } from '../auth/keys.js';
import { RATE_LIMIT_MESSAGES, rateLimitHeaders, type RateCheckResult } from '../auth/rateLimit.js';
import { localTimestamp } from '../store/store.js';
import type { RunRecord } from '../store/types.js';
import { authorizeCall, checkConnection, selectVersion } from './access.js';
import { governCall } from './govern.js';
import { checkStream, streamCall } from './streamCall.js';
import type { CallContext } from './context.js';
import { CallError, errorAnswer, type ErrorCode } from './errors.js';
import { CONTENT_TYPES, EMPTY_JSON } from './formats.js';
import type { CallAnswer, CallTask } from './messages.js';
import { planCall, writerFor, type CallPlan } from './plan.js';
import { parseCall, parsePaging } from './request.js';
import { cacheKey, etagOf, policyFingerprint, type CachedAnswer } from './resultCache.js';

/** Requests rejected by validation are not runs (the contract: they never reached the database). */
const NOT_RECORDED = new Set<ErrorCode>(['param_required', 'param_invalid', 'invalid_paging', 'invalid_timeout']);
const HIDDEN_DETAIL = 'An error occurred while executing the SQL query';

export async function runCall(ctx: CallContext, task: CallTask): Promise<CallAnswer> {
  const limited: CallState = { headers: null, key: '-' };
  const answer = await serveCall(ctx, task, limited);
  if (limited.headers) answer.headers.push(...limited.headers); // answers' header lists are never shared
  answer.key = limited.key;
  return answer;
}

/** What a call learned on the way that every answer carries: its key's limit headers, its caller. */
interface CallState {
  headers: string[] | null;
  key: string;
}

async function serveCall(ctx: CallContext, task: CallTask, limited: CallState): Promise<CallAnswer> {
  let run: RunRecord | null = null; // set once execution starts: from then on errors are recorded
  let caller: Caller | null = null;
  try {
    const req = parseCall(task);
    // The key and the query are read in parallel: one store round trip instead of two.
    const [who, query] = await Promise.all([authenticate(ctx, task.apiKey, task.clientIp), ctx.meta.query(req.name)]);
    caller = who;
    if (!caller) return errorAnswer('unauthorized', 'Unauthorized', task.requestId);
    limited.key = caller.name;
    if (caller.kind === 'key') {
      ctx.runs.noteKeyUse(caller.name); // last_used_at, written by the recorder off the call's path
      // The key's own limits count every call it makes, even one refused later.
      const k = caller.key;
      if (k.rate_limit || k.rate_limits) {
        if (ctx.limitsReady) {
          await ctx.limitsReady;
          ctx.limitsReady = null;
        }
        const refusal = (await checkLimit(ctx.limits.checkKey(k.name, k.rate_limit), limited, task))
          ?? (await checkLimit(ctx.limits.checkKeyQuery(k.name, req.name, k.rate_limits?.[req.name]), limited, task));
        if (refusal) return refusal;
      }
    }

    if (!query) throw new CallError('query_not_found', `Saved query '${req.name}' not found`);
    const version = selectVersion(query, req.version, caller);
    const connectionName = req.connectionName ?? version.connection_name;
    if (!connectionName) throw new CallError('connection_required', 'Connection name is missing');
    authorizeCall(caller, query.name, version.connection_name, connectionName);
    // From here on a failure is a run worth recording, except a request that fails validation.
    run = {
      query: query.name, version: version.version, kind: 'saved', executed_at: localTimestamp(), status: 'success',
      connection_name: connectionName, key_name: caller.name, request_id: task.requestId,
      rows: null, duration_ms: null, serialization_ms: null, transport: 'rest',
    };
    const connection = checkConnection(await ctx.meta.connection(connectionName), connectionName);

    const source = ctx.source(connection);
    const planKey = version.uuid + '\u0000' + connection.name + '\u0000' + source.dialect;
    let plan = ctx.plans.get(planKey);
    if (!plan) ctx.plans.set(planKey, (plan = planCall(planKey, version, source.dialect)));
    const bound = plan.bind(req.typed ? { kind: 'json', get: (n) => req.params[n] } : { kind: 'query', get: (n) => req.params[n] as string | undefined });
    const timeout = effectiveTimeout(ctx.config.queryTimeout, req.timeout);
    const governed = await governCall(ctx, plan, caller, query.name, connection, source);
    if (req.stream) {
      const port = checkStream(req, plan, task.port);
      return await streamCall(ctx, port, req, plan, source, fillValues(plan, bound, 0, 0, false), timeout, governed, run, caller.name);
    }
    const paging = parsePaging(req, ctx.config.maxPageSize);

    // Versions with a cache_ttl answer repeat calls without the database; hits are not runs.
    const ttl = plan.write ? 0 : version.cache_ttl ?? 0;
    let cached: string | null = null;
    if (ttl > 0) {
      cached = cacheKey([query.name, version.version, version.uuid, connection.name, connection.updated_at, bound,
        req.format, paging.page, paging.pageSize, policyFingerprint(caller)]);
      const hit = await ctx.results.get(cached);
      if (hit) {
        ctx.metrics.cacheHits.inc();
        return cacheAnswer(hit, ttl, 'HIT', task.ifNoneMatch);
      }
      ctx.metrics.cacheMisses.inc();
    }

    const started = performance.now();
    const offset = (paging.page - 1) * paging.pageSize;
    const values = fillValues(plan, bound, paging.pageSize + 1, offset);
    const m = ctx.metrics;
    const labels = { connection: connection.name, dialect: source.dialect };
    m.activeQueries.inc();
    let result;
    try {
      result = await source.run(plan.pageable ? plan.pagedText : plan.text, values, { timeoutMs: timeout * 1000, readOnly: !plan.write });
    } catch (e) {
      m.queries.inc({ ...labels, status: 'error', key: caller.name });
      throw e;
    } finally {
      m.activeQueries.dec();
    }
    const executed = performance.now();
    m.queries.inc({ ...labels, status: 'success', key: caller.name });
    m.queryDuration.observe(labels, (executed - started) / 1000);

    let rows = plan.pageable || plan.write ? result.rows : result.rows.slice(offset, offset + paging.pageSize + 1);
    const hasMore = !plan.write && rows.length > paging.pageSize;
    if (hasMore) rows.length = paging.pageSize;
    let columns = result.columns;
    if (governed.masker && rows.length) ({ columns, rows } = governed.masker(columns, rows)); // before any rendering
    const headers = ['Content-Type', CONTENT_TYPES.json, 'X-Page', String(paging.page), 'X-Page-Size', String(paging.pageSize), 'X-Has-More', hasMore ? 'true' : 'false'];
    if (plan.write) headers.push('X-Rows-Affected', String(result.rowCount));
    let body: string;
    if (rows.length === 0) {
      body = EMPTY_JSON; // the contract's empty answer, whatever the format
    } else {
      body = writerFor(plan, columns, req.format)(rows);
      headers[1] = CONTENT_TYPES[req.format];
    }
    if (governed.masked) run.masked = governed.masked;
    m.rows.inc({ ...labels, key: caller.name }, rows.length);
    m.serialization.observe({ format: req.format }, (performance.now() - executed) / 1000);
    run.rows = rows.length;
    run.duration_ms = Math.round(executed - started);
    run.serialization_ms = Math.round((performance.now() - executed) * 10) / 10;
    ctx.runs.add(run);
    if (cached) {
      const entry: CachedAnswer = { body, headers, etag: etagOf(body) };
      ctx.results.set(cached, entry, ttl);
      return cacheAnswer(entry, ttl, 'MISS', task.ifNoneMatch);
    }
    return { status: 200, headers, body };
  } catch (e) {
    const err = e instanceof CallError ? e : null;
    if (!err) console.error(`[${task.requestId}] internal error in /q/${task.name}:`, e);
    const code: ErrorCode = err ? err.code : 'internal_error';
    let message = err ? err.message : 'An error occurred';
    let extras = err?.extras;
    // A scoped key never sees the database's own error text.
    if (extras?.detail !== undefined && caller?.kind === 'key') {
      const { detail: _hidden, ...rest } = extras;
      extras = rest;
      if (code === 'query_failed') message = HIDDEN_DETAIL;
    }
    if (run && !NOT_RECORDED.has(code)) {
      run.status = 'error';
      run.error = message;
      run.code = code;
      ctx.runs.add(run);
    }
    return errorAnswer(code, message, task.requestId, extras);
  }
}

/** Records the key's limit headers; a refusal is a 429 answer, returned as a value. */
async function checkLimit(result: RateCheckResult, limited: CallState, task: CallTask): Promise<CallAnswer | null> {
  if (result === null) return null;
  const c = result instanceof Promise ? await result : result;
  const headers = rateLimitHeaders(c, 'key'); // with Retry-After when refused
  limited.headers = limited.headers ? limited.headers.concat(headers) : headers;
  return c.allowed ? null : errorAnswer('rate_limited', RATE_LIMIT_MESSAGES.key, task.requestId, { retry_after: c.retryAfterS });
}

function cacheAnswer(entry: CachedAnswer, ttl: number, state: 'HIT' | 'MISS', ifNoneMatch: string): CallAnswer {
  const extra = ['ETag', entry.etag, 'Cache-Control', `max-age=${ttl}`, 'X-Cache', state];
  if (ifNoneMatch && ifNoneMatch.split(/\s*,\s*/).includes(entry.etag)) return { status: 304, headers: extra, body: '' };
  return { status: 200, headers: entry.headers.concat(extra), body: entry.body };
}

/** The admin key, a usable scoped key, open mode when no keys exist at all, or null (401). */
async function authenticate(ctx: CallContext, supplied: string, ip: string): Promise<Caller | null> {
  if (supplied) {
    if (isAdminKey(ctx.adminKey, supplied)) return ADMIN;
    const key = await ctx.meta.key(hashSecret(supplied));
    return key && keyIsUsable(key, new Date(), ip) ? { kind: 'key', name: key.name, key } : null;
  }
  if (ctx.adminKey) return null;
  return (await ctx.meta.anyKey()) ? null : OPEN;
}

/** A request may lower QUERYAPIGATE_QUERY_TIMEOUT, never raise it; 0 means no limit. */
function effectiveTimeout(server: number, requested: number | null): number {
  if (requested === null) return server;
  return server === 0 ? requested : Math.min(server, requested);
}

function fillValues(plan: CallPlan, bound: unknown[], limit: number, offset: number, paged = plan.pageable): unknown[] {
  const order = plan.order;
  const n = order.length;
  const values = new Array(paged ? n + 2 : n);
  for (let i = 0; i < n; i++) values[i] = bound[order[i]];
  if (paged) {
    values[n] = limit;
    values[n + 1] = offset;
  }
  return values;
}
