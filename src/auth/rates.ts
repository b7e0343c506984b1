// In charge of the rate limits' vocabulary, shared by both bucket tables (sharedBuckets.ts in this
// process's memory, redisBuckets.ts across instances) and the gate's checks (rateLimit.ts): the
// "N/period" grammar, a check's outcome, the bucket arithmetic, the 429 messages and headers.
//
// The bucket is kept as GCRA state: one number per bucket, the time at which it will be full again
// ("TAT", in integer microseconds). That is the same token bucket as the reference's
// (capacity = limit, refilled continuously at limit/period, starting full) with exact integer
// arithmetic: a token is worth r = ceil(period / limit) µs and the bucket holds limit·r µs, so a
// burst admits exactly `limit` calls and the refill is never faster than asked (the ceil only ever
// makes it a hair slower: below 1 µs per token).

/** One rate: `limit` calls per `periodMs`. */
export interface Rate {
  limit: number;
  periodMs: number;
}

/** The outcome of one take: `remaining` whole tokens left; `retryAfterS` is 0 when allowed. */
export interface RateCheck {
  allowed: boolean;
  limit: number;
  remaining: number;
  retryAfterS: number;
}

/** `null` when no limit applies; a Promise only when Redis is configured. */
export type RateCheckResult = RateCheck | Promise<RateCheck> | null;

/** The 429 messages of the contract, by the bucket that refused. */
export const RATE_LIMIT_MESSAGES = Object.freeze({
  client: 'Rate limit exceeded',
  key: 'Rate limit exceeded for this API key',
});

const PERIODS: Record<string, number> = { second: 1_000, minute: 60_000, hour: 3_600_000, day: 86_400_000 };
const RATE = /^\s*(\d+)\s*\/\s*(second|minute|hour|day)s?\s*$/i;

/** "60/minute", " 5 / Seconds " → {limit, periodMs}; null for anything else (count ≥ 1). */
export function parseRate(s: string): Rate | null {
  const m = RATE.exec(s);
  if (!m) return null;
  const limit = Number(m[1]);
  if (!(limit >= 1) || !Number.isSafeInteger(limit)) return null;
  return { limit, periodMs: PERIODS[m[2].toLowerCase()] };
}

/** The canonical text of a rate: formatRate({limit: 60, periodMs: 60000}) = '60/minute'. */
export function formatRate(rate: Rate): string {
  for (const [unit, ms] of Object.entries(PERIODS)) if (ms === rate.periodMs) return `${rate.limit}/${unit}`;
  return `${rate.limit}/${rate.periodMs}ms`;
}

/** Larger limits are clamped (stricter): keeps every µs value an exact double. */
const MAX_LIMIT = 1e12;

/** A bucket's size for a limit, clamped; the Redis limiter sizes its buckets the same way. */
export function bucketSize(limit: number): number {
  return Math.min(Math.max(1, Math.floor(limit)), MAX_LIMIT);
}

/** Microseconds between tokens for a bucket of `n` over `periodMs`. */
export function tokenInterval(n: number, periodMs: number): number {
  return Math.ceil(Math.max(1, Math.round(periodMs * 1000)) / n);
}

const CLIENT_HEADERS = ['X-RateLimit-Limit', 'X-RateLimit-Remaining'] as const;
const KEY_HEADERS = ['X-RateLimit-Key-Limit', 'X-RateLimit-Key-Remaining'] as const;

/** The flat [name, value, ...] header list for one check, with Retry-After when refused. */
export function rateLimitHeaders(result: RateCheck, kind: 'client' | 'key'): string[] {
  const [limit, remaining] = kind === 'client' ? CLIENT_HEADERS : KEY_HEADERS;
  const headers = [limit, String(result.limit), remaining, String(result.remaining)];
  if (!result.allowed) headers.push('Retry-After', String(result.retryAfterS));
  return headers;
}
