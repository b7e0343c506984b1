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
  {
    // Per-version history as a ring of QUERYAPIGATE_HISTORY_LIMIT slots updated in place: a run's slot is
    // its number within the version (runs_recorded) modulo the limit, so nothing is written then deleted.
    // Rows are ordered by event id (history ids continue as event ids). On PostgreSQL only the key is
    // indexed and pages keep room, so the updates are HOT and their old versions are pruned in the page.
    sqlite: [
      `CREATE TABLE run_history (query_name TEXT NOT NULL, version INTEGER NOT NULL, slot INTEGER NOT NULL,
        event_id INTEGER NOT NULL, executed_at TEXT NOT NULL, status TEXT NOT NULL, key_name TEXT, entry_json TEXT NOT NULL,
        PRIMARY KEY (query_name, version, slot))`,
      'ALTER TABLE saved_query_versions ADD COLUMN runs_recorded INTEGER NOT NULL DEFAULT 0',
      `INSERT INTO run_history SELECT query_name, version, ROW_NUMBER() OVER (PARTITION BY query_name, version ORDER BY id) - 1,
        id, executed_at, status, key_name, entry_json FROM execution_history WHERE query_name IS NOT NULL AND version IS NOT NULL`,
      `UPDATE saved_query_versions SET runs_recorded = (SELECT COUNT(*) FROM run_history h
        WHERE h.query_name = saved_query_versions.query_name AND h.version = saved_query_versions.version)`,
      'DROP TABLE execution_history',
      // The limit the rings are laid out for; empty until the first start re-slots them (Store.resizeRings).
      'CREATE TABLE history_ring (slots INTEGER NOT NULL)',
    ],
    postgres: [
      `CREATE TABLE run_history (query_name TEXT COLLATE "C" NOT NULL, version INTEGER NOT NULL, slot INTEGER NOT NULL,
        event_id BIGINT NOT NULL, executed_at TEXT NOT NULL, status TEXT NOT NULL, key_name TEXT, entry_json TEXT NOT NULL,
        PRIMARY KEY (query_name, version, slot)) WITH (fillfactor = 50)`,
      'ALTER TABLE saved_query_versions ADD COLUMN runs_recorded BIGINT NOT NULL DEFAULT 0',
      `INSERT INTO run_history SELECT query_name, version, ROW_NUMBER() OVER (PARTITION BY query_name, version ORDER BY id) - 1,
        id, executed_at, status, key_name, entry_json FROM execution_history WHERE query_name IS NOT NULL AND version IS NOT NULL`,
      `UPDATE saved_query_versions v SET runs_recorded = (SELECT COUNT(*) FROM run_history h
        WHERE h.query_name = v.query_name AND h.version = v.version)`,
      'DROP TABLE execution_history',
      'CREATE TABLE history_ring (slots INTEGER NOT NULL)',
    ],
  },
  {
    // Named administrators and their tokens (only a token's SHA-256 is kept), and the audit log: each
    // entry chained to the one before by a hash; audit_chain's one row is the anchor (the id and hash
    // of the last entry retention pruned), so verifying still works after pruning.
    sqlite: [
      `CREATE TABLE administrators (name TEXT PRIMARY KEY, role TEXT NOT NULL, active INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL, details_json TEXT NOT NULL)`,
      `CREATE TABLE admin_tokens (id TEXT PRIMARY KEY, admin_name TEXT NOT NULL, hash TEXT NOT NULL UNIQUE, expires_at TEXT,
        created_at TEXT NOT NULL, details_json TEXT NOT NULL)`,
      'CREATE INDEX admin_tokens_admin ON admin_tokens (admin_name)',
      `CREATE TABLE audit_log (id INTEGER PRIMARY KEY, timestamp TEXT NOT NULL, actor TEXT, via TEXT NOT NULL, action TEXT NOT NULL,
        target TEXT, entry_json TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL)`,
      'CREATE TABLE audit_chain (anchor_id INTEGER NOT NULL, anchor_hash TEXT NOT NULL)',
      `INSERT INTO audit_chain (anchor_id, anchor_hash) VALUES (0, '${'0'.repeat(64)}')`,
    ],
    postgres: [
      `CREATE TABLE administrators (name TEXT COLLATE "C" PRIMARY KEY, role TEXT NOT NULL, active INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL, details_json TEXT NOT NULL)`,
      `CREATE TABLE admin_tokens (id TEXT COLLATE "C" PRIMARY KEY, admin_name TEXT COLLATE "C" NOT NULL, hash TEXT NOT NULL UNIQUE, expires_at TEXT,
        created_at TEXT NOT NULL, details_json TEXT NOT NULL)`,
      'CREATE INDEX admin_tokens_admin ON admin_tokens (admin_name)',
      `CREATE TABLE audit_log (id BIGINT PRIMARY KEY, timestamp TEXT NOT NULL, actor TEXT, via TEXT NOT NULL, action TEXT NOT NULL,
        target TEXT, entry_json TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL)`,
      'CREATE TABLE audit_chain (anchor_id BIGINT NOT NULL, anchor_hash TEXT NOT NULL)',
      `INSERT INTO audit_chain (anchor_id, anchor_hash) VALUES (0, '${'0'.repeat(64)}')`,
    ],
  },
  {
    // Key roles (templates of grants): copied into a key when it is made from one, read live for
    // signed-in (JWT) users. keys_created counts the keys made from the role.
    sqlite: [
      `CREATE TABLE key_roles (name TEXT PRIMARY KEY, example INTEGER NOT NULL DEFAULT 0, keys_created INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL, details_json TEXT NOT NULL)`,
      'CREATE INDEX saved_queries_collection ON saved_queries (collection)',
    ],
    postgres: [
      `CREATE TABLE key_roles (name TEXT COLLATE "C" PRIMARY KEY, example INTEGER NOT NULL DEFAULT 0, keys_created INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL, details_json TEXT NOT NULL)`,
      'CREATE INDEX saved_queries_collection ON saved_queries (collection)',
    ],
  },
  {
    // The processes using the store (GET /api/v1/instances): each heartbeats its row; a row unseen for
    // three beats is no longer listed, and one a day old is removed by the next heartbeat. Liveness,
    // not content: store copies leave it out.
    sqlite: [
      `CREATE TABLE instances (id TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, role TEXT NOT NULL, version TEXT NOT NULL,
        shared_limits INTEGER NOT NULL, started_at TEXT NOT NULL, last_seen_ms INTEGER NOT NULL)`,
    ],
    postgres: [
      `CREATE TABLE instances (id TEXT COLLATE "C" PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, role TEXT NOT NULL, version TEXT NOT NULL,
        shared_limits INTEGER NOT NULL, started_at TEXT NOT NULL, last_seen_ms BIGINT NOT NULL)`,
    ],
  },
];

export const SCHEMA_VERSION = MIGRATIONS.length;

export class StoreTooNewError extends Error {}

/** Brings the store to `target` (default: this release's schema; tests stop earlier to build old stores). */
export async function migrate(db: SqlDb, target = SCHEMA_VERSION): Promise<void> {
  await db.tx(async (t) => {
    // One migrator at a time when several instances share a PostgreSQL store.
    if (t.dialect === 'postgres') {
      await t.all('SELECT pg_advisory_xact_lock(20261130)');
      // History is staged in a temporary table (store.ts, historyPg): refused at start, not at the first write.
      const [temp] = await t.all<{ ok: boolean; db: string; role: string }>(
        "SELECT has_database_privilege(current_database(), 'TEMPORARY') AS ok, current_database() AS db, current_user AS role",
      );
      if (!temp.ok) {
        throw new Error(
          `The store's role ${temp.role} may not create temporary tables in ${temp.db}, which recording needs: GRANT TEMPORARY ON DATABASE ${temp.db} TO ${temp.role}`,
        );
      }
    }
    await t.run('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)');
    const rows = await t.all<{ version: number }>('SELECT version FROM schema_version');
    const current = rows.length ? Number(rows[0].version) : 0;
    if (current > SCHEMA_VERSION) {
      throw new StoreTooNewError(
        `The store has schema version ${current}, newer than this release understands (${SCHEMA_VERSION}). ` +
          'Upgrade QueryAPIGate, or point it at another store.',
      );
    }
    for (let v = current; v < target; v++) {
      for (const statement of MIGRATIONS[v][t.dialect]) await t.run(statement);
    }
    if (!rows.length) await t.run('INSERT INTO schema_version (version) VALUES (?)', [target]);
    else if (current < target) await t.run('UPDATE schema_version SET version = ?', [target]);
  });
}
