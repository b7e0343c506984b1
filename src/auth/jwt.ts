// In charge of signed-in users: an `Authorization: Bearer <jwt>` verified against
// QUERYAPIGATE_JWT_SECRET (HMAC) or a JWKS URL, and the caller it names, `jwt:<user claim>`, with the
// grants of a key role read live. Verification is jose's (a well-kept library: algorithms, `exp`,
// `iss`, `aud` and JWKS rotation are easy to get subtly wrong by hand). Knows nothing of HTTP.
import type * as Jose from 'jose';
import { LRUCache } from 'lru-cache';
import type { Config } from '../config.js';
import type { Remote } from '../contract/exchange.js';
import type { Lookup } from '../store/metadata.js';
import type { KeyRow, RoleRow } from '../store/types.js';
import { addressAllowed, addressOf, type Caller } from './keys.js';

/** Where roles are read: an executor's metadata cache (so a role's change reaches users at once). */
export interface RoleLookup {
  role(name: string): Lookup<RoleRow>;
}

/** The reference's bounds: a longer token is refused unread; `exp` may be 30 s past. */
const MAX_TOKEN = 8192;
const LEEWAY_S = 30;
/** Verified tokens kept per thread: at most this many, and this many characters of tokens. */
const MAX_TOKENS = 10_000;
const MAX_TOKEN_CHARS = 16 * 1024 * 1024;

/** A verified token: its claims, the user, the roles it names, and the caller last built from them. */
interface Verified {
  claims: Readonly<Record<string, unknown>>;
  user: string;
  roles: string[];
  /** The role row the caller was built from: the same object until the metadata cache is cleared. */
  built: { role: RoleRow; caller: Caller } | null;
}

/** jose, loaded on first use (JWT on): imported up front it sat in every thread's heap (about 1 MB) with JWT off. */
let joseModule: Promise<typeof Jose> | null = null;
const jose = (): Promise<typeof Jose> => (joseModule ??= import('jose'));

/** True when the config turns signed-in users on. */
export function jwtEnabled(config: Config): boolean {
  return config.jwtSecret !== null || config.jwtJwksUrl !== null;
}

export class JwtAuth {
  /** The HMAC secret, or jose's key set for a JWKS URL (made once jose is loaded). */
  readonly #key: Promise<Uint8Array | Jose.JWTVerifyGetKey>;
  readonly #options: { algorithms: string[]; issuer?: string; audience?: string[]; clockTolerance: number; requiredClaims: string[] };
  readonly #userClaim: string;
  readonly #roleClaim: string[] | null;
  readonly #role: string | null;
  // Verification costs a signature check (and with JWKS, maybe a fetch): each token is verified once
  // per thread and kept until it expires, so the call path reads a map instead.
  readonly #verified = new LRUCache<string, Verified>({ max: MAX_TOKENS, maxSize: MAX_TOKEN_CHARS, sizeCalculation: (_v, k) => k.length });

  constructor(config: Config) {
    const url = config.jwtJwksUrl;
    // jose keeps the key set (one document), refetches it for a key id it has not seen (a
    // rotation), at most every 30 s, and at the latest after 10 minutes.
    this.#key = url
      ? jose().then((j) => j.createRemoteJWKSet(new URL(url), { cacheMaxAge: 600_000, cooldownDuration: 30_000, timeoutDuration: 5000 }))
      : Promise.resolve(new TextEncoder().encode(config.jwtSecret ?? ''));
    this.#key.catch(() => undefined); // a failure is #verify's to meet, not an unhandled rejection before it
    this.#options = {
      algorithms: config.jwtAlgorithms ?? [config.jwtJwksUrl ? 'RS256' : 'HS256'],
      clockTolerance: LEEWAY_S,
      requiredClaims: ['exp'],
      ...(config.jwtIssuer ? { issuer: config.jwtIssuer } : {}),
      ...(config.jwtAudience ? { audience: config.jwtAudience } : {}),
    };
    this.#userClaim = config.jwtUserClaim;
    this.#roleClaim = config.jwtRoleClaim ? config.jwtRoleClaim.split('.') : null;
    this.#role = config.jwtRole;
  }

  /** The caller an Authorization header names, or null (401): a bad token, no user, no existing role, an address not allowed. */
  async identify(authorization: string, roles: RoleLookup, from: Remote): Promise<Caller | null> {
    const token = bearerToken(authorization);
    if (!token) return null;
    let v = this.#verified.get(token);
    if (v && expired(v.claims)) {
      this.#verified.delete(token);
      v = undefined;
    }
    if (!v) {
      const verified = await this.#verify(token);
      if (!verified) return null;
      v = verified;
      // Kept until the token's own expiry (lru-cache ttl in ms), never past it.
      this.#verified.set(token, v, { ttl: Math.max(1, Number(v.claims.exp) * 1000 - Date.now()) });
    }
    for (const name of v.roles) {
      const role = await roles.role(name);
      if (!role) continue;
      if (role.allowed_ips && !addressAllowed(role.allowed_ips, addressOf(from))) return null;
      if (v.built?.role !== role) v.built = { role, caller: userCaller(v.user, v.claims, role) };
      return v.built.caller;
    }
    return null;
  }

  async #verify(token: string): Promise<Verified | null> {
    let claims: Jose.JWTPayload;
    const { jwtVerify, errors } = await jose();
    try {
      const key = await this.#key;
      ({ payload: claims } = typeof key === 'function' ? await jwtVerify(token, key, this.#options) : await jwtVerify(token, key, this.#options));
    } catch (e) {
      // A token that fails is the caller's problem (401); anything else (a JWKS that cannot be fetched) too, but it is not cached.
      if (e instanceof errors.JOSEError || e instanceof TypeError) return null;
      throw e;
    }
    const user = claims[this.#userClaim];
    if ((typeof user !== 'string' || !user) && typeof user !== 'number') return null;
    const roles: string[] = [];
    if (this.#roleClaim) {
      const named = claimAt(claims, this.#roleClaim);
      if (typeof named === 'string') roles.push(named);
      else if (Array.isArray(named)) for (const r of named) if (typeof r === 'string') roles.push(r);
    }
    if (this.#role) roles.push(this.#role);
    return { claims, user: String(user), roles, built: null };
  }
}

/** The token of `Bearer <token>` (scheme case-insensitive), '' for anything else or a token too long. */
export function bearerToken(authorization: string): string {
  if (authorization.length > MAX_TOKEN + 7 || !/^bearer /i.test(authorization)) return '';
  return authorization.slice(7).trim();
}

function expired(claims: Readonly<Record<string, unknown>>): boolean {
  return Number(claims.exp) * 1000 <= Date.now();
}

/** A dotted path into the claims (`realm_access.roles`). */
function claimAt(claims: Record<string, unknown>, path: string[]): unknown {
  let at: unknown = claims;
  for (const step of path) {
    if (at === null || typeof at !== 'object' || !Object.hasOwn(at, step)) return undefined;
    at = (at as Record<string, unknown>)[step];
  }
  return at;
}

/** A signed-in user as a key-shaped caller: the role's grants, read live, under the user's name. */
function userCaller(user: string, claims: Readonly<Record<string, unknown>>, role: RoleRow): Caller {
  const name = `jwt:${user}`;
  const key: KeyRow = {
    name,
    hash: '',
    active: true,
    expires_at: null,
    example: false,
    created_at: role.created_at,
    updated_at: role.updated_at,
    last_used_at: null,
    previous_until: null,
    via_previous: false,
    created_from_role: role.name,
    connections: role.connections,
    queries: role.queries,
    collections: role.collections ?? [],
    allow_writes: role.allow_writes,
    allowed_write_ops: role.allowed_write_ops,
    allowed_tables: role.allowed_tables,
    mask: role.mask,
    mask_predicates: role.mask_predicates,
    rate_limit: role.rate_limit,
    rate_limits: role.rate_limits,
    allowed_ips: role.allowed_ips,
  };
  return { kind: 'key', name, key, claims };
}
