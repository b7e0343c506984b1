// In charge of CORS for browser callers (QUERYAPIGATE_CORS_ORIGINS): which origins are allowed, the
// headers an answer to one carries, and the answer to a preflight. Keys travel in headers
// (X-API-Key, Authorization), never cookies, so no credentials are ever allowed: `*` stays safe.
import type { Answer } from '../contract/exchange.js';

const ALLOW_METHODS = 'GET, POST, PATCH, DELETE, OPTIONS';
const ALLOW_HEADERS = 'Content-Type, X-API-Key, Authorization, X-Request-Id';
const EXPOSE_HEADERS = [
  'X-Page',
  'X-Page-Size',
  'X-Has-More',
  'X-RateLimit-Limit',
  'X-RateLimit-Remaining',
  'X-RateLimit-Key-Limit',
  'X-RateLimit-Key-Remaining',
  'Retry-After',
  'X-Request-Id',
  'X-Cache',
  'ETag',
  'Deprecation',
  'Link',
].join(', ');
/** Seconds a browser may keep a preflight's answer. */
const MAX_AGE = '600';

export interface Cors {
  /** The headers an answer to a request from `origin` carries; null for an origin not allowed (or none sent). */
  headers(origin: string): string[] | null;
  /** The answer to a preflight (OPTIONS with Access-Control-Request-Method): 204, with CORS headers only for an allowed origin. */
  preflight(origin: string): Answer;
}

/** The policy for the configured origins (lower case, no trailing '/', or ['*']); null when CORS is off. */
export function corsPolicy(origins: string[] | null): Cors | null {
  if (!origins) return null;
  const any = origins.includes('*');
  const listed = new Set(origins);
  // Answers for `*` are the same for every origin, so nothing varies by it; for a list, caches must key on Origin.
  const anyHeaders = ['Access-Control-Allow-Origin', '*', 'Access-Control-Expose-Headers', EXPOSE_HEADERS];
  const headers = (origin: string): string[] | null => {
    if (!origin) return null;
    if (any) return anyHeaders;
    const normal = origin.toLowerCase().replace(/\/+$/, '');
    return listed.has(normal) ? ['Access-Control-Allow-Origin', origin, 'Vary', 'Origin', 'Access-Control-Expose-Headers', EXPOSE_HEADERS] : null;
  };
  return {
    headers,
    preflight(origin) {
      const allowed = headers(origin);
      const out = allowed
        ? allowed.concat(['Access-Control-Allow-Methods', ALLOW_METHODS, 'Access-Control-Allow-Headers', ALLOW_HEADERS, 'Access-Control-Max-Age', MAX_AGE])
        : any
          ? []
          : ['Vary', 'Origin'];
      return { status: 204, headers: out, body: '' };
    },
  };
}
