// In charge of a scoped key's own rate limits (rate_limit for all its calls, rate_limits per query):
// every call the key makes counts, even one refused later. The server-wide limit per address is
// the acceptor's (http/app.ts), checked before anyone is identified.
import type { RateLimits } from '../auth/rateLimit.js';
import { rateLimitHeaders, type RateCheck, type RateCheckResult } from '../auth/rates.js';
import type { KeyRow } from '../store/types.js';

/** The headers every answer to this call carries, and the check that refused it, if one did. */
export interface KeyLimit {
  headers: string[];
  refused: RateCheck | null;
}

/** Whether the key has limits of its own to count (rate_limit, or rate_limits per query). */
export function hasOwnLimits(key: KeyRow): boolean {
  return Boolean(key.rate_limit || key.rate_limits);
}

/** Null when the key has no limits. */
export async function limitKey(limits: RateLimits, key: KeyRow, queryName: string): Promise<KeyLimit | null> {
  if (!hasOwnLimits(key)) return null;
  let headers: string[] | null = null;
  const take = async (r: RateCheckResult): Promise<RateCheck | null> => {
    if (r === null) return null;
    const c = r instanceof Promise ? await r : r;
    const h = rateLimitHeaders(c, 'key'); // with Retry-After when refused
    headers = headers ? headers.concat(h) : h;
    return c.allowed ? null : c;
  };
  const refused =
    (await take(limits.checkKey(key.name, key.rate_limit))) ?? (await take(limits.checkKeyQuery(key.name, queryName, key.rate_limits?.[queryName])));
  return headers ? { headers, refused } : null;
}
