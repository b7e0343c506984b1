// In charge of the response cache's routes (contract 3.8): list the entries (soonest to expire
// first), read one as it was answered (its own content type), evict one or all. The entries live in
// the executors or in Redis (call/resultCache.ts, `CacheAdmin`); nothing here touches a call. An
// eviction saves nothing in the store, so it publishes no change, and (contract 1.7) is not audited.
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import { CACHE_KEY } from '../call/resultCache.js';
import { type ApiRouter, NOTHING_CHANGED } from './routes.js';

const notFound = () => new GatewayError('cache_entry_not_found', 'No cached answer has that key (it may have expired or been evicted)');

export function cacheRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/cache/entries', async (ctx) => jsonAnswer(200, { items: await ctx.cache.list() }), NOTHING_CHANGED);
  r.add(
    'DELETE',
    '/api/v1/cache/entries',
    async (ctx) => {
      await ctx.cache.evict(null);
      return jsonAnswer(204, null);
    },
    NOTHING_CHANGED,
  );
  r.add(
    'GET',
    '/api/v1/cache/entries/:key',
    async (ctx, _req, [key]) => {
      if (!CACHE_KEY.test(key)) throw notFound();
      const entry = await ctx.cache.read(key);
      if (!entry) throw notFound();
      return { status: 200, headers: ['Content-Type', entry.content_type, 'Cache-Control', 'no-store'], body: entry.body };
    },
    NOTHING_CHANGED,
  );
  r.add(
    'DELETE',
    '/api/v1/cache/entries/:key',
    async (ctx, _req, [key]) => {
      if (CACHE_KEY.test(key)) await ctx.cache.evict(key);
      return jsonAnswer(204, null);
    },
    NOTHING_CHANGED,
  );
}
