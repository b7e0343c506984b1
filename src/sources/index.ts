// In charge of opening the right data source for a connection and expanding its `${VAR}` secrets;
// must not import keys, HTTP, governance or the store (only the contract's errors).

import { GatewayError } from '../contract/errors.js';
import { openMysql } from './mysql.js';
import { openPostgres } from './postgres.js';
import { openSqlite } from './sqlite.js';
import type { ConnectionConfig, Source, SourceSettings } from './types.js';

export type { ConnectionConfig, Dialect, ResultSet, RunOptions, Source, SourceSettings } from './types.js';

/**
 * Opens a source for `conn` (secrets expanded here, at connect time). PostgreSQL and MySQL/MariaDB
 * connect lazily on the first run; SQLite opens its file now and throws `connection_failed` when it
 * is missing.
 */
export function openSource(conn: ConnectionConfig, settings: SourceSettings): Source {
  const resolved = resolveEnvRefs(conn);
  switch (resolved.db) {
    case 'postgres':
    case 'postgresql':
      return openPostgres(resolved, settings);
    case 'sqlite':
      return openSqlite(resolved, settings);
    case 'mysql':
      return openMysql(resolved, settings);
    default:
      throw new GatewayError('unsupported_database', 'Unsupported database type');
  }
}

const ENV_REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * Replaces `${VAR}` in every string inside `value` (recursing into arrays and plain objects) with
 * `process.env.VAR`. A variable that is not set is `connection_misconfigured`, naming it.
 */
export function resolveEnvRefs<T>(value: T): T {
  if (typeof value === 'string') {
    if (value.indexOf('${') === -1) return value;
    return value.replace(ENV_REF, (_m, name: string) => {
      const v = process.env[name];
      if (v === undefined) {
        throw new GatewayError('connection_misconfigured', `Environment variable '${name}' referenced by the connection is not set`);
      }
      return v;
    }) as T;
  }
  if (Array.isArray(value)) return value.map((v) => resolveEnvRefs(v)) as T;
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = resolveEnvRefs(v);
    return out as T;
  }
  return value;
}
