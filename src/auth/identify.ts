// In charge of the one rule that names a caller from the secret it sent, for every entry point
// (/q/, /api/v1, /events, and any later one): the admin key, a named administrator's token
// (qagadm_...), a usable scoped key, a signed-in (JWT) user, or open mode while no admin key, no
// scoped key and no administrator exist and JWT is off; anything else is nobody (401).
import type { Remote } from '../contract/exchange.js';
import type { AdminTokenHit, Lookup } from '../store/metadata.js';
import type { KeyRow, RoleRow } from '../store/types.js';
import type { JwtAuth } from './jwt.js';
import { ADMIN, OPEN, hashSecret, isAdminKey, keyExpired, keyIsUsable, nothingGranted, type Caller } from './keys.js';
import { ADMIN_TOKEN_PREFIX, DATA_ROLES } from './roles.js';

/** The rows identification reads: the store, or an executor's metadata cache over it. */
export interface KeyLookup {
  key(hash: string): Lookup<KeyRow>;
  adminToken(hash: string): Lookup<AdminTokenHit>;
  /** Whether any scoped key or administrator exists (open mode needs none). */
  anyKey(): Promise<boolean>;
  /** A key role (a signed-in user's grants, read live). */
  role(name: string): Lookup<RoleRow>;
}

/**
 * The caller for `secret` (the X-API-Key header, '' when absent) calling `from` an address (read only
 * when a key or role limits addresses); null for nobody.
 * A request with a key is judged on the key alone; without one, with JWT on (`jwt`), on the
 * `authorization` header's token, and open mode never applies.
 * The caller itself when the rows it needs are cached (a key's, always then), else a promise of it.
 */
export function identify(
  keys: KeyLookup,
  adminKey: Buffer | null,
  secret: string,
  from: Remote,
  jwt: JwtAuth | null = null,
  authorization = '',
): Caller | null | Promise<Caller | null> {
  if (secret) {
    if (isAdminKey(adminKey, secret)) return ADMIN;
    // Only secrets with the token prefix read the tokens table: a scoped key's lookup is unchanged.
    if (secret.startsWith(ADMIN_TOKEN_PREFIX)) {
      const hit = keys.adminToken(hashSecret(secret));
      return hit instanceof Promise ? hit.then(administrator) : administrator(hit);
    }
    const key = keys.key(hashSecret(secret));
    return key instanceof Promise ? key.then((k) => keyCaller(k, from)) : keyCaller(key, from);
  }
  if (jwt) return authorization ? jwt.identify(authorization, keys, from) : null;
  if (adminKey) return null;
  return keys.anyKey().then((any) => (any ? null : OPEN));
}

function keyCaller(key: KeyRow | null, from: Remote): Caller | null {
  return key && keyIsUsable(key, new Date(), from) ? { kind: 'key', name: key.name, key } : null;
}

/** A token's caller: its administrator while active and the token unexpired. */
function administrator(hit: AdminTokenHit | null): Caller | null {
  if (!hit?.admin.active || keyExpired(hit.token.expires_at, new Date())) return null;
  const { name, role } = hit.admin;
  const admin = { name, role, via: 'token' as const, tokenId: hit.token.id };
  return DATA_ROLES.has(role) ? { kind: 'admin', name, admin } : { kind: 'key', name, key: nothingGranted(name), admin };
}
