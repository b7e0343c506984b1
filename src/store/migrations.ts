// In charge of the store's schema: versioned migrations for SQLite and PostgreSQL, applied in
// order at boot. A store written by a newer release is refused rather than guessed at.
import type { SqlDb } from './sql.js';

/** Each migration as [sqlite, postgres] statement lists. Append only; never edit a shipped one. */
const MIGRATIONS: Array<{ sqlite: string[]; postgres: string[] }> = [
  {
    sqlite: [
      `CREATE TABLE connections (name TEXT PRIMARY KEY, db TEXT NOT NULL, active INTEGER NOT NULL,
        example INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, details_json TEXT NOT NULL)`,
      `CREATE TABLE saved_queries (name TEXT PRIMARY KEY, collection TEXT, example INTEGER NOT NULL DEFAULT 0,
        published_version INTEGER, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)`,
      `CREATE TABLE saved_query_versions (query_name TEXT NOT NULL, version INTEGER NOT NULL, uuid TEXT NOT NULL,
        was_published INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, last_modified_at TEXT NOT NULL,
        fields_json TEXT NOT NULL, PRIMARY KEY (query_name, version))`,
      `CREATE TABLE api_keys (name TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, active INTEGER NOT NULL DEFAULT 1,
        expires_at TEXT, example INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
        last_used_at TEXT, details_json TEXT NOT NULL)`,
      `CREATE TABLE execution_history (id INTEGER PRIMARY KEY AUTOINCREMENT, query_name TEXT, version INTEGER,
        executed_at TEXT NOT NULL, status TEXT NOT NULL, key_name TEXT, entry_json TEXT NOT NULL)`,
      `CREATE INDEX execution_history_version ON execution_history (query_name, version, id)`,
    ],
    postgres: [
      `CREATE TABLE connections (name TEXT COLLATE "C" PRIMARY KEY, db TEXT NOT NULL, active INTEGER NOT NULL,
        example INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, updated_at TEXT NOT NULL, details_json TEXT NOT NULL)`,
      `CREATE TABLE saved_queries (name TEXT COLLATE "C" PRIMARY KEY, collection TEXT, example INTEGER NOT NULL DEFAULT 0,
        published_version INTEGER, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)`,
      `CREATE TABLE saved_query_versions (query_name TEXT COLLATE "C" NOT NULL, version INTEGER NOT NULL, uuid TEXT NOT NULL,
        was_published INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, last_modified_at TEXT NOT NULL,
        fields_json TEXT NOT NULL, PRIMARY KEY (query_name, version))`,
      `CREATE TABLE api_keys (name TEXT COLLATE "C" PRIMARY KEY, hash TEXT NOT NULL UNIQUE, active INTEGER NOT NULL DEFAULT 1,
        expires_at TEXT, example INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
        last_used_at TEXT, details_json TEXT NOT NULL)`,
      `CREATE TABLE execution_history (id BIGSERIAL PRIMARY KEY, query_name TEXT COLLATE "C", version INTEGER,
        executed_at TEXT NOT NULL, status TEXT NOT NULL, key_name TEXT, entry_json TEXT NOT NULL)`,
      `CREATE INDEX execution_history_version ON execution_history (query_name, version, id)`,
    ],
  },
  {
    // Per-store secrets, e.g. the HMAC key for masked values (so hashes agree across instances).
    sqlite: ['CREATE TABLE store_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)'],
    postgres: ['CREATE TABLE store_secrets (name TEXT COLLATE "C" PRIMARY KEY, value TEXT NOT NULL)'],
  },
  {
    // Rotation with a grace period: the old secret's hash stays valid until previous_until (epoch ms).
    sqlite: [
      'ALTER TABLE api_keys ADD COLUMN previous_hash TEXT',
      'ALTER TABLE api_keys ADD COLUMN previous_until INTEGER',
      'CREATE INDEX api_keys_previous_hash ON api_keys (previous_hash)',
    ],
    postgres: [
      'ALTER TABLE api_keys ADD COLUMN previous_hash TEXT',
      'ALTER TABLE api_keys ADD COLUMN previous_until BIGINT',
      'CREATE INDEX api_keys_previous_hash ON api_keys (previous_hash)',
    ],
  },
];

export const SCHEMA_VERSION = MIGRATIONS.length;

export class StoreTooNewError extends Error {}

export async function migrate(db: SqlDb): Promise<void> {
  await db.tx(async (t) => {
    // One migrator at a time when several instances share a PostgreSQL store.
    if (t.dialect === 'postgres') await t.all('SELECT pg_advisory_xact_lock(20261130)');
    await t.run('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)');
    const rows = await t.all<{ version: number }>('SELECT version FROM schema_version');
    const current = rows.length ? Number(rows[0].version) : 0;
    if (current > SCHEMA_VERSION) {
      throw new StoreTooNewError(
        `The store has schema version ${current}, newer than this release understands (${SCHEMA_VERSION}). ` +
          'Upgrade QueryAPIGate, or point it at another store.',
      );
    }
    for (let v = current; v < SCHEMA_VERSION; v++) {
      for (const statement of MIGRATIONS[v][t.dialect]) await t.run(statement);
    }
    if (!rows.length) await t.run('INSERT INTO schema_version (version) VALUES (?)', [SCHEMA_VERSION]);
    else if (current !== SCHEMA_VERSION) await t.run('UPDATE schema_version SET version = ?', [SCHEMA_VERSION]);
  });
}
