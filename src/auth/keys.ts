// In charge of API key secrets and the checks made on every call against a key's row: hashing,
// generation, the admin key comparison, activity and expiry. Knows nothing of HTTP or SQL.
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { LRUCache } from 'lru-cache';
import { AddressNeeded } from '../contract/errors.js';
import { ADDRESS_UNREAD, type Remote } from '../contract/exchange.js';
import type { KeyRow } from '../store/types.js';
import type { AdminIdentity } from './roles.js';

/**
 * Who is calling. For data (/q/, /execute_sql, MCP): unrestricted (the admin key, a named
 * administrator of a data role, open mode) or a scoped key's row. `admin` says, for the management
 * API, which administrator it is; an auditor's token reaches data as a key granted nothing. A
 * signed-in (JWT) user is key-shaped (its role's grants under its own name) and carries its token's `claims`.
 */
export type Caller =
  | { kind: 'admin'; name: string; admin: AdminIdentity }
  | { kind: 'open'; name: '-'; admin: AdminIdentity }
  | { kind: 'key'; name: string; key: KeyRow; admin?: AdminIdentity; claims?: Readonly<Record<string, unknown>> };

/** The caller in metric labels: every signed-in user is `jwt` (one label, not one per user). */
export function metricKey(caller: Caller): string {
  return caller.kind === 'key' && caller.claims ? 'jwt' : caller.name;
}

export const ADMIN: Caller = Object.freeze({ kind: 'admin', name: 'admin', admin: Object.freeze({ name: 'admin', role: 'owner', via: 'break-glass' }) });
export const OPEN: Caller = Object.freeze({ kind: 'open', name: '-', admin: Object.freeze({ name: null, role: 'owner', via: 'open' }) });

/** A key row granting nothing: what an auditor's token is judged by on data routes (every call refused), and a new key before its grants. */
export function nothingGranted(name: string): KeyRow {
  return {
    name,
    hash: '',
    active: true,
    expires_at: null,
    example: false,
    created_at: '',
    updated_at: '',
    last_used_at: null,
    connections: [],
    queries: [],
    allow_writes: false,
    allowed_write_ops: null,
    allowed_tables: null,
    mask: null,
    rate_limit: null,
    rate_limits: null,
    allowed_ips: null,
    previous_until: null,
    via_previous: false,
  };
}

/** 'sk_' + 32 random bytes, base64url, as the contract's secrets.token_urlsafe(32). */
export function generateSecret(): string {
  return `sk_${randomBytes(32).toString('base64url')}`;
}

/** Only this unsalted SHA-256 hex of a secret is stored; a lookup is one indexed read. (The one-shot
 * `hash` takes a third of `createHash`'s time, and every call with a key pays it.) */
export function hashSecret(secret: string): string {
  return hash('sha256', secret, 'hex');
}

/**
 * Constant-time comparison against the configured admin key. Only its length is told apart early, as
 * timingSafeEqual needs equal lengths anyway: a scoped key (every /q/ call's) costs no copy.
 */
export function isAdminKey(adminKey: Buffer | null, supplied: string): boolean {
  if (!adminKey || !supplied || Buffer.byteLength(supplied, 'utf8') !== adminKey.length) return false;
  return timingSafeEqual(Buffer.from(supplied, 'utf8'), adminKey);
}

/**
 * The rules checked on every call against the key's row: active, a rotated-out secret still in its
 * grace period, not past expires_at (a
 * YYYY-MM-DD date, valid through the end of that day in the server's zone), and called from an
 * allowed address (null allows any; [] allows none; an unknown address fails closed).
 */
export function keyIsUsable(key: KeyRow, now: Date, from: Remote): boolean {
  if (!key.active) return false;
  // A rotated-out secret works only until its grace period ends.
  if (key.via_previous && (key.previous_until === null || now.getTime() >= key.previous_until)) return false;
  if (key.allowed_ips && !addressAllowed(key.allowed_ips, addressOf(from))) return false;
  return !keyExpired(key.expires_at, now);
}

/** Past expires_at (YYYY-MM-DD), which is valid through the end of that day in the server's zone. */
export function keyExpired(expiresAt: string | null, now: Date): boolean {
  const ends = keyEndsAt(expiresAt);
  return ends !== null && now.getTime() >= ends.getTime();
}

/** The moment a key with this expires_at (YYYY-MM-DD) stops working: the next midnight, server time; null for none. */
export function keyEndsAt(expiresAt: string | null): Date | null {
  if (!expiresAt) return null;
  const [y, m, d] = expiresAt.split('-').map(Number);
  return y && m && d ? new Date(y, m - 1, d + 1) : null;
}

/** The caller's address for an address rule; a call that crossed without it is asked again with it. */
export function addressOf(from: Remote): string {
  if (from.ip === ADDRESS_UNREAD) throw new AddressNeeded();
  return from.ip;
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
