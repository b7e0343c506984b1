// In charge of one saved-query call end to end: the only place that sequences the stages, each a
// function of its own that hands the next plain values:
//   request (parse) → identify → limits → resolve and authorize → plan and bind → govern
//   → execute → shape → record
// (from govern on, call/statement.ts, which ad-hoc SQL and MCP share), and the one catch, which turns
// any failure into an answer (recorded once the call has a target). Never imports uWS; runs inline or
// in an executor.
import { identify } from '../auth/identify.js';
import { type Caller, metricKey } from '../auth/keys.js';
import { RATE_LIMIT_MESSAGES } from '../auth/rates.js';
import { type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import type { KeyRow, QueryRow } from '../store/types.js';
import { checkConnection, resolveTarget } from './authorize.js';
import type { ParamSource } from './binder.js';
import { bindClaims } from './claims.js';
import type { CallContext } from './context.js';
import { hasOwnLimits, limitKey } from './limits.js';
import { planFor } from './plan.js';
import { type RunTarget, savedRun } from './record.js';
import { type CallRequest, parseCall } from './request.js';
import { type CallOptions, failure, restOptions, runStatement } from './statement.js';

export async function runCall(ctx: CallContext, req: Request): Promise<Answer> {
  let caller: Caller | null = null;
  let limitHeaders: string[] | null = null; // the key's limit headers, on every answer once counted
  let answer: Answer;
  ctx.catchUp(req.changes);
  try {
    const call = parseCall(req);
    // The caller and the query: at once from the metadata cache, else read in parallel (one store
    // round trip instead of two). Each await skipped is a promise and a turn fewer on the hot path.
    let who = identify(ctx.meta, ctx.adminKey, req.apiKey, req, ctx.jwt, req.authorization);
    let query = ctx.meta.query(call.name);
    if (who instanceof Promise || query instanceof Promise) [who, query] = await Promise.all([who, query]);
    caller = who;
    if (!caller) return finish(errorAnswer('unauthorized', 'Unauthorized', req.requestId), null, '-');
    let admitted = admit(ctx, caller, call.name, req.requestId);
    if (admitted instanceof Promise) admitted = await admitted;
    limitHeaders = admitted.headers;
    answer = admitted.refused ?? (await savedCall(ctx, caller, query, call, restOptions(req)));
  } catch (e) {
    answer = failure(ctx, req.requestId, req.url, e, caller, null);
  }
  return finish(answer, limitHeaders, caller ? metricKey(caller) : '-');
}

/** A saved query called by an identified caller: resolve, authorize, plan, bind, then the shared stages. */
export async function savedCall(ctx: CallContext, caller: Caller, query: QueryRow | null, call: CallRequest, o: CallOptions): Promise<Answer> {
  let run: RunTarget | null = null; // set once the call is authorized: from then on failures are recorded
  try {
    const target = resolveTarget(query, call, caller);
    run = savedRun(target, o.transport);
    let row = ctx.meta.connection(target.connectionName);
    if (row instanceof Promise) row = await row;
    const connection = checkConnection(row, target.connectionName);
    const source = ctx.source(connection);
    const plan = planFor(ctx.plans, target.version, connection.name, source.dialect);
    const values: ParamSource = call.typed
      ? { kind: 'json', get: (n) => call.params.get(n) }
      : { kind: 'query', get: (n) => call.params.get(n) as string | undefined };
    const bound = plan.bind(plan.claims.length ? bindClaims(plan.claims, caller, values) : values);
    const { version } = target;
    return await runStatement(
      ctx,
      caller,
      call,
      {
        plan,
        bound,
        connection,
        source,
        run,
        queryName: target.query.name,
        fileName: target.query.name,
        // Built only for a version that caches: most never do, and this runs on every call.
        cache: version.cache_ttl ? { ttl: version.cache_ttl, id: [target.query.name, version.version, version.uuid], version: version.version } : null,
      },
      o,
    );
  } catch (e) {
    return failure(ctx, o.requestId, `/q/${call.name}`, e, caller, run);
  }
}

/** What admission decided: the key's limit headers for every answer, and the refusal when over a limit. */
export interface Admitted {
  headers: string[] | null;
  refused: Answer | null;
}
const UNLIMITED: Admitted = { headers: null, refused: null };

/**
 * A scoped key's use noted and its own limits counted (`limitName`: the query, '' for ad-hoc SQL);
 * decided at once for a caller without limits, else a promise.
 */
export function admit(ctx: CallContext, caller: Caller, limitName: string, requestId: string): Admitted | Promise<Admitted> {
  if (caller.kind !== 'key') return UNLIMITED;
  // last_used_at, written by the recorder off the call's path (a signed-in user has no key row)
  if (!caller.claims) ctx.runs.noteKeyUse(caller.name);
  if (!hasOwnLimits(caller.key)) return UNLIMITED;
  return countLimits(ctx, caller.key, limitName, requestId);
}

async function countLimits(ctx: CallContext, key: KeyRow, limitName: string, requestId: string): Promise<Admitted> {
  if (ctx.limitsReady) {
    await ctx.limitsReady;
    ctx.limitsReady = null;
  }
  const limit = await limitKey(ctx.limits, key, limitName);
  if (!limit) return UNLIMITED;
  const refused = limit.refused ? errorAnswer('rate_limited', RATE_LIMIT_MESSAGES.key, requestId, { retry_after: limit.refused.retryAfterS }) : null;
  return { headers: limit.headers, refused };
}

/** Every answer carries the key's limit headers and, for the request metrics, the caller's name. */
export function finish(answer: Answer, limitHeaders: string[] | null, key: string): Answer {
  if (limitHeaders) answer.headers.push(...limitHeaders); // answers' header lists are never shared
  answer.key = key;
  return answer;
}
