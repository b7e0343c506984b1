// In charge of reading the audit log through /api/v1/audit: filters (action, actor, target, q for text
// anywhere, since, until), newest first, paged by an opaque cursor; with the total the filters match,
// every action present, and the retention the log keeps.
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import type { AuditFilter } from '../store/audit.js';
import type { ApiRouter } from './routes.js';

const TIME = /^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2})?$/;

function filters(a: URLSearchParams): AuditFilter {
  const f: AuditFilter = { limit: 100 };
  for (const k of ['action', 'actor', 'target', 'q'] as const) {
    const value = a.get(k);
    if (value) f[k] = value;
  }
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
  const cursor = a.get('cursor');
  if (cursor) {
    const id = Number(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!Number.isSafeInteger(id) || id < 1) throw new GatewayError('invalid_filter', 'cursor is not valid');
    f.before = id;
  }
  return f;
}

export function auditRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/audit', async (ctx, req) => {
    const f = filters(new URLSearchParams(req.query));
    const { items, total, actions } = await ctx.store.audit.list({ ...f, limit: f.limit + 1 });
    const more = items.length > f.limit;
    if (more) items.length = f.limit;
    return jsonAnswer(200, {
      items,
      total,
      actions,
      retention: { limit: ctx.config.auditLogLimit },
      next_cursor: more ? Buffer.from(String(items[items.length - 1].id)).toString('base64url') : null,
    });
  });
}
