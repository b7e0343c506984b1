// In charge of what an administrator's role may do: the capabilities, each role's set (contract 2.2),
// and the administrator token's secret and id. Which route needs which capability is the API's table
// (api/access.ts); this file only knows roles.
import { randomBytes } from 'node:crypto';
import type { AdminRole } from '../store/admins.js';
import type { AuditVia } from '../store/audit.js';

export type { AdminRole };

export const ROLES: readonly AdminRole[] = ['owner', 'admin', 'developer', 'auditor'];

export const CAPABILITIES = [
  'queries.read',
  'queries.write',
  'connections.read',
  'connections.write',
  'access.read',
  'access.write',
  'history.read',
  'audit.read',
  'alerts.read',
  'instances.read',
  'settings.read',
  'cache.write',
  'examples.write',
  'sql.run',
  'admins.manage',
] as const;
export type Capability = (typeof CAPABILITIES)[number];

const ALL = new Set<Capability>(CAPABILITIES);

/** Each role's capabilities, as contract 2.2 words them. */
const ROLE_CAPABILITIES: Readonly<Record<AdminRole, ReadonlySet<Capability>>> = {
  owner: ALL,
  // Everything except administrators.
  admin: new Set(CAPABILITIES.filter((c) => c !== 'admins.manage')),
  // Saved queries and collections; reads connections, history, audit and alerts; runs SQL. No keys.
  developer: new Set<Capability>(['queries.read', 'queries.write', 'connections.read', 'history.read', 'audit.read', 'alerts.read', 'sql.run']),
  // Read-only, no SQL.
  auditor: new Set<Capability>([
    'queries.read',
    'connections.read',
    'access.read',
    'audit.read',
    'history.read',
    'alerts.read',
    'instances.read',
    'settings.read',
  ]),
};

/** Roles that reach data (/q/, /execute_sql, MCP) as the admin key does; an auditor runs no SQL. */
export const DATA_ROLES: ReadonlySet<AdminRole> = new Set(['owner', 'admin', 'developer']);

export function can(role: AdminRole, capability: Capability): boolean {
  return ROLE_CAPABILITIES[role].has(capability);
}

export function capabilitiesOf(role: AdminRole): Capability[] {
  return CAPABILITIES.filter((c) => ROLE_CAPABILITIES[role].has(c));
}

/** How a caller is an administrator: a named one's token, the shared key, open mode, the command line, start-up. */
export interface AdminIdentity {
  /** The administrator's name; 'admin' for the shared key, null in open mode. */
  name: string | null;
  role: AdminRole;
  via: AuditVia;
  /** The token used (via 'token'), for its last_used_at. */
  tokenId?: string;
}

export const ADMIN_TOKEN_PREFIX = 'qagadm_';

/** 'qagadm_' + 32 random bytes, base64url (the contract's token_urlsafe(32)). */
export function generateAdminToken(): string {
  return `${ADMIN_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** 'tok_' + 12 hex characters. */
export function generateTokenId(): string {
  return `tok_${randomBytes(6).toString('hex')}`;
}

/** Names no administrator (nor, for 'admin', any key) may take: the shared key's and the command line's. */
export const RESERVED_ADMIN_NAMES: ReadonlySet<string> = new Set(['admin', 'cli']);
