// In charge of who may call which management route: one table, route -> the capability it needs
// (auth/roles.ts says which roles have it), checked before any handler runs. A route missing from
// the table stops the router's lock (so a new route cannot ship unchecked). 401 for nobody, 403
// admin_only for a scoped key, 403 role_forbidden for an administrator whose role lacks it.
import type { Caller } from '../auth/keys.js';
import { type AdminIdentity, type Capability, can } from '../auth/roles.js';
import { GatewayError } from '../contract/errors.js';

export interface RouteAccess {
  /** null: any administrator (GET /api/v1/me). */
  capability: Capability | null;
  /**
   * The administrator named by the route's first path parameter may call it without the capability
   * (their own record and tokens); on a list route, the handler narrows the list to the caller.
   */
  self?: true;
}

/** 'PATCH /api/v1/api-keys/:name' -> 'PATCH /api/v1/api-keys/:' (parameter names do not matter). */
export function routeSlot(method: string, pattern: string): string {
  return `${method} ${pattern.replace(/:[^/]+/g, ':')}`;
}

const read = (capability: Capability): RouteAccess => ({ capability });
const write = read;

/** Every /api/v1 route and what it needs, grouped as contract 3 groups them. */
const TABLE: Record<string, RouteAccess> = {
  'GET /api/v1/me': { capability: null },
  // 3.2 queries (and history of one)
  'GET /api/v1/queries': read('queries.read'),
  'POST /api/v1/queries': write('queries.write'),
  'POST /api/v1/queries/validate': write('queries.write'),
  'GET /api/v1/queries/:name': read('queries.read'),
  'PATCH /api/v1/queries/:name': write('queries.write'),
  'DELETE /api/v1/queries/:name': write('queries.write'),
  'POST /api/v1/queries/:name/versions': write('queries.write'),
  'GET /api/v1/queries/:name/versions/:version': read('queries.read'),
  'PATCH /api/v1/queries/:name/versions/:version': write('queries.write'),
  'DELETE /api/v1/queries/:name/versions/:version': write('queries.write'),
  'GET /api/v1/queries/:name/versions/:version/flow': read('queries.read'),
  'POST /api/v1/queries/:name/publish': write('queries.write'),
  'POST /api/v1/queries/:name/unpublish': write('queries.write'),
  'GET /api/v1/queries/:name/history': read('history.read'),
  // 3.3 connections; the schema and the probe read the database with the saved credentials
  'GET /api/v1/connections': read('connections.read'),
  'POST /api/v1/connections': write('connections.write'),
  'GET /api/v1/connections/deleted': read('connections.read'),
  'GET /api/v1/connections/:name': read('connections.read'),
  'PATCH /api/v1/connections/:name': write('connections.write'),
  'DELETE /api/v1/connections/:name': write('connections.write'),
  'GET /api/v1/connections/:name/schema': read('connections.read'),
  'POST /api/v1/connections/:name/test': read('connections.read'),
  'POST /api/v1/connections/test': write('connections.write'),
  'POST /api/v1/connections/databases': write('connections.write'),
  // 3.4 keys and roles
  'GET /api/v1/api-keys': read('access.read'),
  'POST /api/v1/api-keys': write('access.write'),
  'GET /api/v1/api-keys/:name': read('access.read'),
  'PATCH /api/v1/api-keys/:name': write('access.write'),
  'DELETE /api/v1/api-keys/:name': write('access.write'),
  'POST /api/v1/api-keys/:name/rotate': write('access.write'),
  'GET /api/v1/roles': read('access.read'),
  'POST /api/v1/roles': write('access.write'),
  'GET /api/v1/roles/:name': read('access.read'),
  'PATCH /api/v1/roles/:name': write('access.write'),
  'DELETE /api/v1/roles/:name': write('access.write'),
  // 3.5 administrators: owners; anyone their own record and tokens
  'GET /api/v1/administrators': { capability: 'admins.manage', self: true },
  'POST /api/v1/administrators': write('admins.manage'),
  'GET /api/v1/administrators/:name': { capability: 'admins.manage', self: true },
  'PATCH /api/v1/administrators/:name': write('admins.manage'),
  'DELETE /api/v1/administrators/:name': write('admins.manage'),
  'GET /api/v1/administrators/:name/tokens': { capability: 'admins.manage', self: true },
  'POST /api/v1/administrators/:name/tokens': { capability: 'admins.manage', self: true },
  'DELETE /api/v1/administrators/:name/tokens/:id': { capability: 'admins.manage', self: true },
  // 3.6 history, the event log, audit
  'GET /api/v1/history': read('history.read'),
  'GET /api/v1/events': read('history.read'),
  'GET /api/v1/audit': read('audit.read'),
  // 3.7 collections and examples (a move that widens access is the key's business: access.write)
  'GET /api/v1/collections': read('queries.read'),
  'PATCH /api/v1/collections/:name': write('queries.write'),
  'GET /api/v1/collections/:name/postman': read('queries.read'),
  'GET /api/v1/examples': read('queries.read'),
  'POST /api/v1/examples': write('examples.write'),
  'DELETE /api/v1/examples': write('examples.write'),
  // 3.8 cache, settings, MCP, alerts, instances
  'GET /api/v1/cache/entries': read('queries.read'),
  'DELETE /api/v1/cache/entries': write('cache.write'),
  'GET /api/v1/cache/entries/:key': read('queries.read'),
  'DELETE /api/v1/cache/entries/:key': write('cache.write'),
  'GET /api/v1/settings': read('settings.read'),
  'GET /api/v1/mcp/status': read('settings.read'),
  'GET /api/v1/mcp/tools': read('queries.read'),
  'GET /api/v1/alerts': read('alerts.read'),
  'GET /api/v1/instances': read('instances.read'),
};

const BY_SLOT = new Map(Object.entries(TABLE).map(([route, access]) => [routeSlot(...(route.split(' ') as [string, string])), access]));

/** What the route needs; undefined when the table does not list it. */
export function routeAccess(method: string, pattern: string): RouteAccess | undefined {
  return BY_SLOT.get(routeSlot(method, pattern));
}

/** Every route the table lists, as 'METHOD /pattern' (the table-driven tests walk it). */
export function listedRoutes(): string[] {
  return Object.keys(TABLE);
}

/** The administrator a caller is (null: a scoped key, not an administrator). */
export function administratorOf(who: Caller): AdminIdentity | null {
  return who.admin ?? null;
}

/**
 * Passes when `who` may call a route needing `access` with these path parameters; throws 401, 403
 * admin_only or 403 role_forbidden (with the capability and the role) otherwise.
 */
export function checkAccess(who: Caller | null, access: RouteAccess, params: string[]): AdminIdentity {
  if (!who) throw new GatewayError('unauthorized', 'Unauthorized');
  const admin = administratorOf(who);
  if (!admin) throw new GatewayError('admin_only', 'Only an administrator may do this');
  if (access.capability === null || can(admin.role, access.capability)) return admin;
  if (access.self && admin.via === 'token' && (params.length === 0 || params[0] === admin.name)) return admin;
  throw new GatewayError('role_forbidden', `The ${admin.role} role may not do this (it needs ${access.capability})`, {
    capability: access.capability,
    role: admin.role,
  });
}
