// In charge of reading run history through /api/v1: filters, newest first, paged by an opaque cursor.
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import type { HistoryFilter } from '../store/types.js';
import type { ApiRouter, ControlContext } from './routes.js';

const TIME = /^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2})?$/;

/** The filters history and event reads share: query, kind, version, status, key, since, until, limit. */
function filters(a: URLSearchParams, defaultLimit = 100, fixedQuery?: string): HistoryFilter {
  const f: HistoryFilter = { limit: defaultLimit };
  const query = fixedQuery ?? a.get('query');
  if (query) f.query = query;
  const version = a.get('version');
  if (version) {
    if (!/^\d+$/.test(version)) throw new GatewayError('invalid_filter', 'version must be a positive integer');
    f.version = Number(version);
  }
  const kind = a.get('kind');
  if (kind) {
    if (kind !== 'saved' && kind !== 'adhoc') throw new GatewayError('invalid_filter', 'kind must be saved or adhoc');
    f.kind = kind;
  }
  const status = a.get('status');
  if (status) {
    if (status !== 'success' && status !== 'error') throw new GatewayError('invalid_filter', 'status must be success or error');
    f.status = status;
  }
  const key = a.get('key');
  if (key) f.key = key;
  for (const k of ['since', 'until'] as const) {
    const t = a.get(k);
    if (!t) continue;
    if (!TIME.test(t)) throw new GatewayError('invalid_filter', `${k} must be YYYY-MM-DD or YYYY-MM-DD HH:MM:SS`);
    f[k] = t.length === 10 ? `${t} 00:00:00` : t;
  }
  const limit = a.get('limit');
  if (limit) {
    if (!/^\d+$/.test(limit) || +limit < 1 || +limit > 1000) throw new GatewayError('invalid_filter', 'limit must be between 1 and 1000');
    f.limit = Number(limit);
  }
  return f;
}

export async function historyPage(ctx: ControlContext, qs: string, fixed: { query?: string; defaultLimit: number }) {
  const a = new URLSearchParams(qs);
  const f = filters(a, fixed.defaultLimit, fixed.query);
  const cursor = a.get('cursor');
  if (cursor) {
    const id = Number(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Number.isSafeInteger(id) || id < 1) throw new GatewayError('invalid_filter', 'cursor is not valid');
    f.before = id;
  }
  await ctx.flushHistory();
  const rows = await ctx.store.listHistory({ ...f, limit: f.limit + 1 });
  const more = rows.length > f.limit;
  if (more) rows.length = f.limit;
  return {
    items: rows.map(({ id: _id, ...entry }) => entry),
    next_cursor: more ? Buffer.from(String(rows[rows.length - 1].id)).toString('base64url') : null,
  };
}

export function historyRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/history', async (ctx, req) => jsonAnswer(200, await historyPage(ctx, req.query, { defaultLimit: 100 })));

  // The event log: every run of the retention window, oldest first, paged by `after` (an event id).
  r.add('GET', '/api/v1/events', async (ctx, req) => {
    const a = new URLSearchParams(req.query);
    const after = a.get('after') ?? '0';
    if (!/^\d{1,15}$/.test(after)) throw new GatewayError('invalid_filter', 'after must be an event id');
    // Events carry no version column; a filter that would be ignored is refused instead.
    if (a.has('version') || a.has('kind'))
      throw new GatewayError('invalid_filter', 'Events filter by query, key, status, since and until, not version or kind');
    const f = filters(a);
    await ctx.flushHistory();
    const items = await ctx.events.read({ ...f, after: Number(after), limit: f.limit });
    return jsonAnswer(200, { items, next_after: items.length === f.limit ? items[items.length - 1].id : null });
  });
}
