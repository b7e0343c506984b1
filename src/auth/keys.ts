// In charge of API key secrets and the checks made on every call against a key's row: hashing,
// generation, the admin key comparison, activity and expiry. Knows nothing of HTTP or SQL.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { LRUCache } from 'lru-cache';
import type { KeyRow } from '../store/types.js';

/**
 * Who is calling: the admin key, open mode (no keys configured), or a scoped key's row. A signed-in
 * (JWT) user is key-shaped (its role's grants under its own name) and carries its token's `claims`.
 */
export type Caller =
  | { kind: 'admin'; name: 'admin' }
  | { kind: 'open'; name: '-' }
  | { kind: 'key'; name: string; key: KeyRow; claims?: Readonly<Record<string, unknown>> };

/** The caller in metric labels: every signed-in user is `jwt` (one label, not one per user). */
export function metricKey(caller: Caller): string {
  return caller.kind === 'key' && caller.claims ? 'jwt' : caller.name;
}

export const ADMIN: Caller = Object.freeze({ kind: 'admin', name: 'admin' });
export const OPEN: Caller = Object.freeze({ kind: 'open', name: '-' });

/** 'sk_' + 32 random bytes, base64url, as the contract's secrets.token_urlsafe(32). */
export function generateSecret(): string {
  return `sk_${randomBytes(32).toString('base64url')}`;
}

/** Only this unsalted SHA-256 hex of a secret is stored; a lookup is one indexed read. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Constant-time comparison against the configured admin key. */
export function isAdminKey(adminKey: Buffer | null, supplied: string): boolean {
  if (!adminKey || !supplied) return false;
  const given = Buffer.from(supplied, 'utf8');
  return given.length === adminKey.length && timingSafeEqual(given, adminKey);
}

/**
 * The rules checked on every call against the key's row: active, a rotated-out secret still in its
 * grace period, not past expires_at (a
 * YYYY-MM-DD date, valid through the end of that day in the server's zone), and called from an
 * allowed address (null allows any; [] allows none; an unknown address fails closed).
 */
export function keyIsUsable(key: KeyRow, now: Date, ip: string): boolean {
  if (!key.active) return false;
  // A rotated-out secret works only until its grace period ends.
  if (key.via_previous && (key.previous_until === null || now.getTime() >= key.previous_until)) return false;
  if (key.allowed_ips && !addressAllowed(key.allowed_ips, ip)) return false;
  return !keyExpired(key.expires_at, now);
}

/** Past expires_at (YYYY-MM-DD), which is valid through the end of that day in the server's zone. */
export function keyExpired(expiresAt: string | null, now: Date): boolean {
  if (!expiresAt) return false;
  const [y, m, d] = expiresAt.split('-').map(Number);
  return Boolean(y && m && d) && now.getTime() >= new Date(y, m - 1, d + 1).getTime();
}

/** Address lists built once per allow-list, not per call (key rows are re-read when the metadata cache is off). */
const blockLists = new LRUCache<string, BlockList>({ max: 1000 });

export function addressAllowed(allowed: string[], ip: string): boolean {
  const family = isIP(ip);
  if (!family || !allowed.length) return false;
  const slot = allowed.join(',');
  let list = blockLists.get(slot);
  if (!list) {
    list = new BlockList();
    for (const entry of allowed) {
      const [addr, bits] = entry.split('/');
      const f = isIP(addr) === 6 ? 'ipv6' : 'ipv4';
      if (bits === undefined) list.addAddress(addr, f);
      else list.addSubnet(addr, Number(bits), f);
    }
    blockLists.set(slot, list);
  }
  return list.check(ip, family === 6 ? 'ipv6' : 'ipv4');
}
