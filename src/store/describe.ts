// In charge of naming a store for people (start-up lines, command output) without its secrets:
// "SQLite /home/x/queryapigate.db" or "PostgreSQL postgres://user@host:5432/db", never a password.
import { join } from 'node:path';
import { STORE_FILE, type StoreLocation } from './store.js';

export function describeStore(where: Pick<StoreLocation, 'home' | 'databaseUrl'>): string {
  if (!where.databaseUrl) return `SQLite ${join(where.home, STORE_FILE)}`;
  return `PostgreSQL ${redactUrl(where.databaseUrl)}`;
}

/** The URL without its password and query string (which may carry one, e.g. ?password=). */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.password = '';
    u.search = '';
    return u.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@').replace(/\?.*$/, '');
  }
}
