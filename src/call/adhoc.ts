// In charge of an ad-hoc statement call (POST /execute_sql, MCP's execute_sql) up to the stages it
// shares with saved queries: its request (sql, params, connection_name, format, timeout in a JSON body;
// paging and stream in the query string), its reach (a connections grant alone), its plan (the text
// as sent, read once per text and dialect in a small cache of its own, so ad-hoc traffic never evicts
// saved plans) and how history names its run. From govern on it is call/statement.ts, as /q/ is.
import { createHash } from 'node:crypto';
import type { LRUCache } from 'lru-cache';
import { identify } from '../auth/identify.js';
import { type Caller, metricKey } from '../auth/keys.js';
import { GatewayError } from '../contract/errors.js';
import { type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import { lex } from '../governance/scan.js';
import type { Dialect } from '../sources/types.js';
import { localTimestamp } from '../store/store.js';
import { authorizeAdhoc, checkConnection } from './authorize.js';
import type { CallContext } from './context.js';
import { type CallPlan, planCall } from './plan.js';
import { adhocEntry, type RunTarget } from './record.js';
import { type CallRequest, callOptions, parseJsonObject, parseQueryString } from './request.js';
import { admit, finish } from './runCall.js';
import { type CallOptions, failure, restOptions, runStatement } from './statement.js';

/** An ad-hoc call's intent: the statement, where it runs, and the options every call takes. */
export interface AdhocRequest extends CallRequest {
  sql: string;
  connectionName: string;
  /** Another database on the connection's server: administrators only, and not offered here. */
  database: string | null;
}

const BODY_FIELDS = new Set(['sql', 'params', 'connection_name', 'format', 'timeout', 'database']);
/** Options the body may carry; paging and stream go in the query string only. */
const BODY_OPTIONS = new Set(['format', 'timeout']);

/** POST /execute_sql's body and query string, checked for shape only. */
export function parseAdhoc(req: Request): AdhocRequest {
  const body = parseJsonObject(req.body);
  if (!body) throw new GatewayError('invalid_body', 'The body must be a JSON object with sql and connection_name');
  return adhocRequest(body, parseQueryString(req.query));
}

export function adhocRequest(body: Record<string, unknown>, args: ReadonlyMap<string, string>): AdhocRequest {
  for (const k of Object.keys(body)) if (!BODY_FIELDS.has(k)) throw new GatewayError('unknown_field', `Unknown field '${k}'`);
  const { sql, params, connection_name: connection, database } = body;
  if (sql === undefined || sql === null || (typeof sql === 'string' && sql.trim() === '')) throw new GatewayError('sql_required', 'sql is required');
  if (typeof sql !== 'string') throw new GatewayError('invalid_body', 'sql must be a string');
  if (connection === undefined || connection === null || connection === '') throw new GatewayError('connection_required', 'Connection name is missing');
  if (typeof connection !== 'string') throw new GatewayError('invalid_body', 'connection_name must be a string');
  if (params !== undefined && (params === null || typeof params !== 'object' || Array.isArray(params))) {
    throw new GatewayError('invalid_body', 'params must be a JSON object');
  }
  if (database !== undefined && database !== null && typeof database !== 'string') throw new GatewayError('invalid_body', 'database must be a string');
  const options = callOptions((k) => args.get(k) ?? (BODY_OPTIONS.has(k) ? body[k] : undefined));
  return {
    ...options,
    sql,
    connectionName: connection,
    database: database ?? null,
    params: new Map(Object.entries(params ?? {})),
    typed: true,
  };
}

/** POST /execute_sql: identify, count the key's limits, then the ad-hoc call. */
export async function runAdhoc(ctx: CallContext, req: Request): Promise<Answer> {
  let caller: Caller | null = null;
  let limitHeaders: string[] | null = null;
  let answer: Answer;
  ctx.catchUp(req.changes);
  try {
    const call = parseAdhoc(req);
    caller = await identify(ctx.meta, ctx.adminKey, req.apiKey, req, ctx.jwt, req.authorization);
    if (!caller) return finish(errorAnswer('unauthorized', 'Unauthorized', req.requestId), null, '-');
    const admitted = await admit(ctx, caller, '', req.requestId);
    limitHeaders = admitted.headers;
    answer = admitted.refused ?? (await adhocCall(ctx, caller, call, restOptions(req)));
  } catch (e) {
    answer = failure(ctx, req.requestId, req.url, e, caller, null, true);
  }
  return finish(answer, limitHeaders, caller ? metricKey(caller) : '-');
}

/** An ad-hoc statement from an identified caller: reach, plan, bind, then the stages saved queries go through. */
export async function adhocCall(ctx: CallContext, caller: Caller, call: AdhocRequest, o: CallOptions): Promise<Answer> {
  let run: RunTarget | null = null;
  try {
    authorizeAdhoc(caller, call.connectionName);
    if (call.database !== null) {
      if (caller.kind === 'key') throw new GatewayError('admin_only', 'Only an administrator may name another database');
      throw new GatewayError('invalid_request', 'Running against another database of the server is not supported; add a connection for it');
    }
    run = { query: null, version: null, connectionName: call.connectionName, executedAt: localTimestamp(), transport: o.transport };
    run.adhoc = adhocEntry(call.sql, ctx.config.historyAdhocSql, [...call.params.keys()]);
    const connection = checkConnection(await ctx.meta.connection(call.connectionName), call.connectionName);
    const source = ctx.source(connection);
    const plan = adhocPlan(ctx.adhocPlans, call.sql, connection.name, source.dialect);
    run.adhoc.params = [...plan.params].sort(); // the statement's markers, not whatever names the body sent
    const bound = plan.bind({ kind: 'json', get: (n) => call.params.get(n) });
    return await runStatement(ctx, caller, call, { plan, bound, connection, source, run, queryName: null, fileName: 'result', cache: null }, o);
  } catch (e) {
    return failure(ctx, o.requestId, '/execute_sql', e, caller, run, true);
  }
}

/** The plan of an ad-hoc statement, cached per text, connection and dialect. */
export function adhocPlan(plans: LRUCache<string, CallPlan>, sql: string, connection: string, dialect: Dialect): CallPlan {
  const key = `adhoc\u0000${createHash('sha256').update(sql).digest('base64')}\u0000${connection}\u0000${dialect}`;
  let plan = plans.get(key);
  if (!plan) {
    plan = planCall(key, { sql, parameters: null }, dialect);
    checkEnclosable(plan.text, dialect);
    plans.set(key, plan);
  }
  return plan;
}

/**
 * A page is cut by running the statement inside `SELECT * FROM (...)`: a text whose parentheses do
 * not balance, as the database reads them, could close that subquery and go on with SQL of its own.
 */
function checkEnclosable(text: string, dialect: Dialect): void {
  let depth = 0;
  for (const t of lex(text, dialect).tokens) {
    if (t.kind !== 'punct') continue;
    if (t.text === '(') depth++;
    else if (t.text === ')' && --depth < 0) break;
  }
  if (depth !== 0) throw new GatewayError('invalid_sql', 'The statement has unbalanced parentheses');
}
