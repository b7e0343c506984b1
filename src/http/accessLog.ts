// In charge of the access line: one per answered request, written by the acceptor as it answers
// (method, route, status, duration, key name, request id; never the query string or a header's
// secret), and a WARNING instead for a /q/ call slower than QUERYAPIGATE_SLOW_QUERY_THRESHOLD.
import type { Config } from '../config.js';
import type { Answer, Request } from '../contract/exchange.js';
import { logger } from '../log.js';

/** Told of an answer and how long it took, in milliseconds. */
export type AccessLine = (req: Request, a: Answer, ms: number) => void;

/** Paths longer than this are cut: a request's junk must not make a line of any size. */
const MAX_ROUTE = 256;

/** The access line of one route's answers; `endpoint` is its metrics name ('run_named_query' for /q/). */
export function accessLine(endpoint: string, config: Pick<Config, 'slowQueryThreshold'>): AccessLine {
  const log = logger('access');
  const slowMs = endpoint === 'run_named_query' && config.slowQueryThreshold > 0 ? config.slowQueryThreshold * 1000 : Number.POSITIVE_INFINITY;
  const slowMessage = `slow call: took longer than QUERYAPIGATE_SLOW_QUERY_THRESHOLD (${config.slowQueryThreshold} s)`;
  // One object per route, refilled for each line: pino serializes it at once and keeps nothing.
  const fields = { request_id: '', key: '', method: '', route: '', status: 0, duration_ms: 0 };
  return (req, a, ms) => {
    const slow = ms >= slowMs;
    if (!slow && !log.isLevelEnabled('info')) return;
    fields.request_id = req.requestId;
    fields.key = a.key ?? '-';
    fields.method = req.method;
    fields.route = req.url.length > MAX_ROUTE ? `${req.url.slice(0, MAX_ROUTE)}...` : req.url;
    fields.status = a.status;
    fields.duration_ms = Math.round(ms * 10) / 10;
    if (slow) log.warn(fields, slowMessage);
    else log.info(fields, 'request');
  };
}
