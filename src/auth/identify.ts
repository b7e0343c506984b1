// In charge of the one rule that names a caller from the secret it sent, for every entry point
// (/q/, /api/v1, /events, and any later one): the admin key, a usable scoped key, a signed-in
// (JWT) user, or open mode while no admin key and no scoped key exist and JWT is off; anything
// else is nobody (401).
import type { JwtAuth } from './jwt.js';
import { ADMIN, OPEN, hashSecret, isAdminKey, keyIsUsable, type Caller } from './keys.js';
import type { KeyRow, RoleRow } from '../store/types.js';

/** The key rows identification reads: the store, or an executor's metadata cache over it. */
export interface KeyLookup {
  key(hash: string): Promise<KeyRow | null>;
  /** Whether any scoped key exists (open mode needs none). */
  anyKey(): Promise<boolean>;
  /** A key role (a signed-in user's grants, read live). */
  role(name: string): Promise<RoleRow | null>;
}

/**
 * The caller for `secret` (the X-API-Key header, '' when absent) calling from `ip`; null for nobody.
 * A request with a key is judged on the key alone; without one, with JWT on (`jwt`), on the
 * `authorization` header's token, and open mode never applies.
 */
export async function identify(
  keys: KeyLookup,
  adminKey: Buffer | null,
  secret: string,
  ip: string,
  jwt: JwtAuth | null = null,
  authorization = '',
): Promise<Caller | null> {
  if (secret) {
    if (isAdminKey(adminKey, secret)) return ADMIN;
    const key = await keys.key(hashSecret(secret));
    return key && keyIsUsable(key, new Date(), ip) ? { kind: 'key', name: key.name, key } : null;
  }
  if (jwt) return authorization ? jwt.identify(authorization, keys, ip) : null;
  if (adminKey) return null;
  return (await keys.anyKey()) ? null : OPEN;
}
