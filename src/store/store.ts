// In charge of reading and writing the store's rows (connections, saved queries and versions, API
// keys, run history) on either engine. Rows are validated by the API layer before they get here.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { EventRow, RunRecord } from '../contract/messages.js';
import { AdminStore } from './admins.js';
import { AuditStore } from './audit.js';
import { InstanceStore } from './instances.js';
import { migrate } from './migrations.js';
import { payloadJson, runOf } from './events.js';
import { causeOf, copyData, copyField, copyJson, nextPiece, openPostgres, openSqlite, valuesList, type SqlDb } from './sql.js';
import type { ConnectionRow, HistoryEntry, HistoryFilter, KeyGrants, KeyRow, QueryRow, RoleRow, VersionFields, VersionRow } from './types.js';

export const STORE_FILE = 'queryapigate.db';

/** A saved query's run as the alerts read it (Store.recentRuns). */
export interface RecentRun {
  query: string;
  version: number;
  eventId: number;
  executedAt: string;
  ok: boolean;
  connection: string | null;
  /** The error code of a failed run. */
  code: string | null;
  durationMs: number | null;
}

export interface StoreLocation {
  home: string;
  databaseUrl: string | null;
  /** Seconds a new connection to a PostgreSQL store may take (QUERYAPIGATE_CONNECT_TIMEOUT); default 10. */
  connectTimeout?: number;
}

/**
 * The most a read from an executor (a key, query or connection row) waits for a PostgreSQL store:
 * such reads take a millisecond or two, so one this slow means the store is in trouble, and the
 * call answers 503 rather than wait with it.
 */
export const STORE_READ_TIMEOUT_MS = 2000;

/** The recorder's writes and transactions on a PostgreSQL store: past this, dropped and tried again (store/sql.ts). */
export const STORE_WRITE_TIMEOUT_MS = 10_000;

/** Opens the store and brings its schema up to date (the control plane's copy). */
export async function openStore(where: StoreLocation): Promise<Store> {
  const db = where.databaseUrl ? openPostgres(where.databaseUrl, { connectTimeoutS: where.connectTimeout }) : openSqlite(join(where.home, STORE_FILE));
  try {
    await migrate(db);
  } catch (e) {
    await db.close();
    throw causeOf(e); // at startup, the driver's own words (the setting is named by the caller)
  }
  return new Store(db);
}

/**
 * An executor's (`readonly`: its reads limited to STORE_READ_TIMEOUT_MS) or the recorder's own
 * connection to an existing, migrated store.
 */
export function attachStore(where: StoreLocation, opts: { readonly: boolean; max?: number }): Store {
  return new Store(
    where.databaseUrl
      ? openPostgres(where.databaseUrl, {
          max: opts.max ?? 2,
          connectTimeoutS: where.connectTimeout,
          readTimeoutMs: opts.readonly ? STORE_READ_TIMEOUT_MS : 0,
          writeTimeoutMs: opts.readonly ? 0 : STORE_WRITE_TIMEOUT_MS,
        })
      : openSqlite(join(where.home, STORE_FILE), { readonly: opts.readonly }),
  );
}

/** Local time as the contract writes it: YYYY-MM-DD HH:MM:SS. */
export function localTimestamp(d?: Date): string {
  if (d !== undefined) return formatLocal(d);
  // Now, made once per second: every call records when it ran.
  const second = Math.floor(Date.now() / 1000);
  if (second !== lastSecond) {
    lastSecond = second;
    lastStamp = formatLocal(new Date(second * 1000));
  }
  return lastStamp;
}
let lastSecond = Number.NaN;
let lastStamp = '';

function formatLocal(d: Date): string {
  const p = (n: number) => (n < 10 ? `0${n}` : `${n}`);
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

const bool = (v: unknown) => v === 1 || v === true || v === '1';

// The tables' rows as the engines return them (flags are INTEGER 0/1; BIGINT comes back as a number
// from fromPg, INTEGER may be text on some drivers, hence the Number() where they are read).
interface ConnectionRecord {
  name: string;
  db: string;
  active: number;
  example: number;
  created_at: string;
  updated_at: string;
  details_json: string;
}

interface QueryRecord {
  name: string;
  collection: string | null;
  example: number;
  published_version: number | null;
  created_at: string;
  updated_at: string;
}

interface VersionRecord {
  version: number;
  uuid: string;
  was_published: number;
  created_at: string;
  last_modified_at: string;
  fields_json: string;
}

/** getQuery's join: the query's columns, then one version's (all null for a query with no version). */
type QueryVersionRecord = QueryRecord & { [K in Exclude<keyof VersionRecord, 'created_at'>]: VersionRecord[K] | null } & {
  v_created_at: string | null;
};

interface KeyRecord {
  name: string;
  hash: string;
  active: number;
  expires_at: string | null;
  example: number;
  created_at: string;
  updated_at: string;
  last_used_at: string | null;
  details_json: string;
  previous_until: number | null;
  /** Only from getKeyByHash: 1 when the row was found by its previous hash. */
  via_previous?: number;
}

export class Store {
  /** Administrators and their tokens (store/admins.ts). */
  readonly admins: AdminStore;
  /** The hash-chained audit log (store/audit.ts). */
  readonly audit: AuditStore;
  /** The processes using the store, by their heartbeats (store/instances.ts). */
  readonly instances: InstanceStore;

  constructor(readonly db: SqlDb) {
    this.admins = new AdminStore(db);
    this.audit = new AuditStore(db);
    this.instances = new InstanceStore(db);
  }

  close(): Promise<void> {
    return this.db.close();
  }

  /** A per-store secret, created at random on first use; the same for every instance. */
  async secret(name: string): Promise<string> {
    const value = randomBytes(32).toString('hex');
    await this.db.run('INSERT INTO store_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING', [name, value]);
    return (await this.readSecret(name))!;
  }

  async readSecret(name: string): Promise<string | null> {
    const rows = await this.db.all<{ value: string }>('SELECT value FROM store_secrets WHERE name = ?', [name]);
    return rows.length ? rows[0].value : null;
  }

  // ── connections ───────────────────────────────────────────────────────────────────────────
  async listConnections(): Promise<ConnectionRow[]> {
    return (await this.db.all<ConnectionRecord>('SELECT * FROM connections ORDER BY name')).map(toConnection);
  }

  async getConnection(name: string): Promise<ConnectionRow | null> {
    const rows = await this.db.all<ConnectionRecord>('SELECT * FROM connections WHERE name = ?', [name]);
    return rows.length ? toConnection(rows[0]) : null;
  }

  async putConnection(c: ConnectionRow, isNew: boolean): Promise<boolean> {
    const details = JSON.stringify({ host: c.host, port: c.port, database: c.database, user: c.user, password: c.password, options: c.options });
    if (isNew) {
      return (
        (await this.db.run(
          `INSERT INTO connections (name, db, active, example, created_at, updated_at, details_json)
        VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
          [c.name, c.db, c.active ? 1 : 0, c.example ? 1 : 0, c.created_at, c.updated_at, details],
        )) === 1
      );
    }
    return (
      (await this.db.run('UPDATE connections SET db = ?, active = ?, updated_at = ?, details_json = ? WHERE name = ?', [
        c.db,
        c.active ? 1 : 0,
        c.updated_at,
        details,
        c.name,
      ])) === 1
    );
  }

  async deleteConnection(name: string): Promise<boolean> {
    return (await this.db.run('DELETE FROM connections WHERE name = ?', [name])) === 1;
  }

  // ── saved queries ─────────────────────────────────────────────────────────────────────────
  async listQueries(): Promise<QueryRow[]> {
    const [queries, versions] = await Promise.all([
      this.db.all<QueryRecord>('SELECT * FROM saved_queries ORDER BY name'),
      this.db.all<VersionRecord & { query_name: string }>('SELECT * FROM saved_query_versions ORDER BY query_name, version'),
    ]);
    const byName = new Map<string, VersionRow[]>();
    for (const v of versions) {
      let list = byName.get(v.query_name);
      if (!list) {
        list = [];
        byName.set(v.query_name, list);
      }
      list.push(toVersion(v));
    }
    return queries.map((q) => toQuery(q, byName.get(q.name) ?? []));
  }

  /** The query with all its versions, in one round trip. */
  async getQuery(name: string): Promise<QueryRow | null> {
    const rows = await this.db.all<QueryVersionRecord>(
      `SELECT q.name, q.collection, q.example, q.published_version, q.created_at, q.updated_at,
              v.version, v.uuid, v.was_published, v.created_at AS v_created_at, v.last_modified_at, v.fields_json
         FROM saved_queries q LEFT JOIN saved_query_versions v ON v.query_name = q.name
        WHERE q.name = ? ORDER BY v.version`,
      [name],
    );
    if (!rows.length) return null;
    const versions = rows[0].version === null ? [] : rows.map((r) => toVersion({ ...r, created_at: r.v_created_at } as VersionRecord));
    return toQuery(rows[0], versions);
  }

  /** Creates the query with its first version; false when the name is taken. */
  async createQuery(
    q: { name: string; collection: string | null; example: boolean },
    first: VersionFields & { uuid: string },
    publish: boolean,
    now: string,
  ): Promise<boolean> {
    return this.db.tx(async (t) => {
      if ((await t.all('SELECT 1 FROM saved_queries WHERE name = ?', [q.name])).length) return false;
      await t.run('INSERT INTO saved_queries (name, collection, example, published_version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)', [
        q.name,
        q.collection,
        q.example ? 1 : 0,
        publish ? 1 : null,
        now,
        now,
      ]);
      await insertVersion(t, q.name, 1, first, publish, now);
      return true;
    });
  }

  /** Adds the next version; returns its number, or null when the query is gone. */
  async addVersion(name: string, fields: VersionFields & { uuid: string }, publish: boolean, now: string): Promise<number | null> {
    return this.db.tx(async (t) => {
      const rows = await t.all<{ v: number | null }>(
        'SELECT (SELECT MAX(version) FROM saved_query_versions WHERE query_name = ?) AS v FROM saved_queries WHERE name = ?',
        [name, name],
      );
      if (!rows.length) return null;
      const version = Number(rows[0].v ?? 0) + 1;
      await insertVersion(t, name, version, fields, publish, now);
      await t.run(
        `UPDATE saved_queries SET updated_at = ?${publish ? ', published_version = ?' : ''} WHERE name = ?`,
        publish ? [now, version, name] : [now, name],
      );
      return version;
    });
  }

  /** Publishes a version (or unpublishes with null); false when the query or version is missing. */
  async setPublished(name: string, version: number | null, now: string): Promise<boolean> {
    return this.db.tx(async (t) => {
      if (version !== null) {
        const n = await t.run('UPDATE saved_query_versions SET was_published = 1, last_modified_at = ? WHERE query_name = ? AND version = ?', [
          now,
          name,
          version,
        ]);
        if (n !== 1) return false;
      }
      return (await t.run('UPDATE saved_queries SET published_version = ?, updated_at = ? WHERE name = ?', [version, now, name])) === 1;
    });
  }

  /** Changes a version's cache_ttl in place (not a new version); false when it does not exist. */
  async setCacheTtl(name: string, version: number, ttl: number | null, now: string): Promise<boolean> {
    return this.db.tx(async (t) => {
      const rows = await t.all<{ fields_json: string }>('SELECT fields_json FROM saved_query_versions WHERE query_name = ? AND version = ?', [name, version]);
      if (!rows.length) return false;
      const fields = { ...JSON.parse(rows[0].fields_json), cache_ttl: ttl };
      await t.run('UPDATE saved_query_versions SET fields_json = ?, last_modified_at = ? WHERE query_name = ? AND version = ?', [
        JSON.stringify(fields),
        now,
        name,
        version,
      ]);
      return true;
    });
  }

  async deleteQuery(name: string): Promise<boolean> {
    return this.db.tx(async (t) => {
      await t.run('DELETE FROM run_history WHERE query_name = ?', [name]);
      await t.run('DELETE FROM saved_query_versions WHERE query_name = ?', [name]);
      return (await t.run('DELETE FROM saved_queries WHERE name = ?', [name])) === 1;
    });
  }

  async runCounts(name: string): Promise<Map<number, number>> {
    const rows = await this.db.all<{ version: number; n: number }>('SELECT version, COUNT(*) AS n FROM run_history WHERE query_name = ? GROUP BY version', [
      name,
    ]);
    return new Map(rows.map((r) => [Number(r.version), Number(r.n)]));
  }

  // ── API keys ──────────────────────────────────────────────────────────────────────────────
  async listKeys(): Promise<KeyRow[]> {
    return (await this.db.all<KeyRecord>('SELECT * FROM api_keys ORDER BY name')).map(toKey);
  }

  async getKey(name: string): Promise<KeyRow | null> {
    const rows = await this.db.all<KeyRecord>('SELECT * FROM api_keys WHERE name = ?', [name]);
    return rows.length ? toKey(rows[0]) : null;
  }

  /** The key this secret hash belongs to: its current secret, or one rotated out but still in grace. */
  async getKeyByHash(hash: string): Promise<KeyRow | null> {
    const rows = await this.db.all<KeyRecord>(
      'SELECT *, 0 AS via_previous FROM api_keys WHERE hash = ? UNION ALL SELECT *, 1 AS via_previous FROM api_keys WHERE previous_hash = ?',
      [hash, hash],
    );
    return rows.length ? toKey(rows[0]) : null;
  }

  /**
   * Every key under each secret hash getKeyByHash finds it by: a rotated-out hash (via_previous)
   * and its current one, which wins where the two are the same text.
   */
  async listKeysByHash(): Promise<Array<[hash: string, key: KeyRow]>> {
    const rows = await this.db.all<KeyRecord & { previous_hash: string | null }>('SELECT * FROM api_keys ORDER BY name');
    const out: Array<[string, KeyRow]> = [];
    for (const r of rows) if (r.previous_hash) out.push([r.previous_hash, toKey({ ...r, via_previous: 1 })]);
    for (const r of rows) out.push([r.hash, toKey({ ...r, via_previous: 0 })]);
    return out;
  }

  /** Replaces the key's secret; the old one stays valid until `previousUntil` (null: not at all). */
  async rotateKey(name: string, hash: string, previousUntil: number | null, now: string): Promise<boolean> {
    return (
      (await this.db.run(
        'UPDATE api_keys SET previous_hash = CASE WHEN CAST(? AS TEXT) IS NULL THEN NULL ELSE hash END, previous_until = ?, hash = ?, updated_at = ? WHERE name = ?',
        [previousUntil === null ? null : 'grace', previousUntil, hash, now, name],
      )) === 1
    );
  }

  /** Whether any scoped key or administrator exists: while none does (and no admin key is set), the server is open. */
  async anyCredential(): Promise<boolean> {
    const [{ n }] = await this.db.all<{ n: number }>('SELECT (SELECT COUNT(*) FROM api_keys) + (SELECT COUNT(*) FROM administrators) AS n');
    return Number(n) > 0;
  }

  async countKeys(): Promise<number> {
    const rows = await this.db.all<{ n: number }>('SELECT COUNT(*) AS n FROM api_keys');
    return Number(rows[0].n);
  }

  async putKey(k: KeyRow, isNew: boolean): Promise<boolean> {
    const grants = { ...grantsOf(k), created_from_role: k.created_from_role ?? null };
    const details = JSON.stringify(grants);
    if (isNew) {
      // A taken name changes nothing (false); two creates at once cannot both pass a check made first.
      return (
        (await this.db.run(
          `INSERT INTO api_keys (name, hash, active, expires_at, example, created_at, updated_at, last_used_at, details_json)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
          [k.name, k.hash, k.active ? 1 : 0, k.expires_at, k.example ? 1 : 0, k.created_at, k.updated_at, k.last_used_at, details],
        )) === 1
      );
    }
    return (
      (await this.db.run('UPDATE api_keys SET active = ?, expires_at = ?, updated_at = ?, details_json = ? WHERE name = ?', [
        k.active ? 1 : 0,
        k.expires_at,
        k.updated_at,
        details,
        k.name,
      ])) === 1
    );
  }

  // ── key roles ─────────────────────────────────────────────────────────────────────────────
  async listRoles(): Promise<RoleRow[]> {
    return (await this.db.all<RoleRecord>('SELECT * FROM key_roles ORDER BY name')).map(toRole);
  }

  async getRole(name: string): Promise<RoleRow | null> {
    const rows = await this.db.all<RoleRecord>('SELECT * FROM key_roles WHERE name = ?', [name]);
    return rows.length ? toRole(rows[0]) : null;
  }

  /** Creates (false when the name is taken) or replaces a role's grants (false when it is gone). */
  async putRole(r: RoleRow, isNew: boolean): Promise<boolean> {
    const details = JSON.stringify(grantsOf(r));
    if (isNew) {
      return (
        (await this.db.run(
          'INSERT INTO key_roles (name, example, keys_created, created_at, updated_at, details_json) VALUES (?, ?, 0, ?, ?, ?) ON CONFLICT (name) DO NOTHING',
          [r.name, r.example ? 1 : 0, r.created_at, r.updated_at, details],
        )) === 1
      );
    }
    return (await this.db.run('UPDATE key_roles SET updated_at = ?, details_json = ? WHERE name = ?', [r.updated_at, details, r.name])) === 1;
  }

  async deleteRole(name: string): Promise<boolean> {
    return (await this.db.run('DELETE FROM key_roles WHERE name = ?', [name])) === 1;
  }

  /** Counts one more key made from the role. */
  async noteRoleUsed(name: string): Promise<void> {
    await this.db.run('UPDATE key_roles SET keys_created = keys_created + 1 WHERE name = ?', [name]);
  }

  // ── collections ───────────────────────────────────────────────────────────────────────────
  /** The collection names that hold at least one query. */
  async collectionNames(): Promise<string[]> {
    const rows = await this.db.all<{ collection: string }>('SELECT DISTINCT collection FROM saved_queries WHERE collection IS NOT NULL ORDER BY collection');
    return rows.map((r) => r.collection);
  }

  /**
   * Rewrites the `collections` grant of every key and role that holds `from` (one transaction):
   * `add` adds `to` beside it, otherwise `from` is removed. Returns the keys and roles changed.
   */
  async regrantCollection(from: string, to: string, step: 'add' | 'remove', now: string): Promise<{ keys: number; roles: number }> {
    return this.db.tx(async (t) => {
      const out = { keys: 0, roles: 0 };
      for (const [table, counter] of [
        ['api_keys', 'keys'],
        ['key_roles', 'roles'],
      ] as const) {
        const rows = await t.all<{ name: string; details_json: string }>(`SELECT name, details_json FROM ${table}`);
        for (const r of rows) {
          const d = JSON.parse(r.details_json) as KeyGrants;
          const held = d.collections ?? [];
          if (!held.includes(from)) continue;
          const next = step === 'add' ? [...new Set([...held, to])].sort() : held.filter((c) => c !== from);
          if (next.length === held.length && step === 'add') continue;
          d.collections = next;
          await t.run(`UPDATE ${table} SET details_json = ?, updated_at = ? WHERE name = ?`, [JSON.stringify(d), now, r.name]);
          out[counter]++;
        }
      }
      return out;
    });
  }

  /** Puts one query in a collection (null: in none); false when the query does not exist. */
  async setCollection(name: string, collection: string | null, now: string): Promise<boolean> {
    return (await this.db.run('UPDATE saved_queries SET collection = ?, updated_at = ? WHERE name = ?', [collection, now, name])) === 1;
  }

  /** Moves every query of collection `from` into `to`; returns how many moved. */
  async moveCollection(from: string, to: string, now: string): Promise<number> {
    return this.db.run('UPDATE saved_queries SET collection = ?, updated_at = ? WHERE collection = ?', [to, now, from]);
  }

  async touchKeys(names: string[], at: string): Promise<void> {
    await this.db.tx(async (t) => {
      for (const n of names) await t.run('UPDATE api_keys SET last_used_at = ? WHERE name = ?', [at, n]);
    });
  }

  async deleteKey(name: string): Promise<boolean> {
    return (await this.db.run('DELETE FROM api_keys WHERE name = ?', [name])) === 1;
  }

  // ── run history ───────────────────────────────────────────────────────────────────────────
  /**
   * Writes a batch of runs (already in the event log, so each has its event id) into each version's
   * ring of `keep` slots, in one transaction. A version's counter gives each run its number; run n goes
   * to slot n % keep, overwriting the oldest. Only the newest `keep` of a batch are written at all.
   * Runs of a query deleted meanwhile are skipped. Rings were sized for `keep` by resizeRings. An entry is the
   * run's payloadJson, made for the runs written: query, executed_at, status and key have columns.
   */
  async writeRuns(runs: EventRow[], keep: number, adhocKeep = ADHOC_KEEP_DEFAULT): Promise<number> {
    const batch = new HistoryBatch(keep, adhocKeep);
    for (const run of runs) batch.add(run, run.id);
    return this.writeHistory(batch);
  }

  /** writeRuns for runs gathered in a HistoryBatch (the recorder's way: it holds only what the rings keep). */
  async writeHistory(batch: HistoryBatch): Promise<number> {
    const { versions, adhoc, keep, adhocKeep } = batch;
    if (!versions.size && !adhoc.ids.length) return 0;
    return this.db.tx(async (t) => {
      // Ad-hoc runs share one list under the name '' (no query's): the event id split over version and
      // slot (slot is 32-bit on PostgreSQL), so the key's own order is the runs' order and the newest
      // `adhocKeep` are found by walking its end.
      const adhocRows = historyColumns();
      for (let i = Math.max(0, adhoc.ids.length - adhocKeep); i < adhoc.ids.length; i++) {
        const id = adhoc.ids[i];
        pushRow(adhocRows, ADHOC, Math.floor(id / ADHOC_SPLIT), id % ADHOC_SPLIT, adhoc, i);
      }
      if (t.dialect === 'postgres') return historyPg(t, versions, keep, adhocRows, adhocKeep);
      let n = versions.size ? await savedRunsSqlite(t, versions, keep) : 0;
      if (adhocRows[0].length) {
        await upsertRowsSqlite(t, adhocRows);
        await trimAdhoc(t, adhocKeep);
        n += adhocRows[0].length;
      }
      return n;
    });
  }

  /**
   * Re-slots every ring for a new QUERYAPIGATE_HISTORY_LIMIT, once at start and only when the limit changed:
   * each version keeps its newest `keep` runs, the newest in slot (runs_recorded - 1) % keep and so on back,
   * so the next run overwrites the oldest. Slots pass through negative numbers to dodge the primary key.
   */
  async resizeRings(keep: number): Promise<boolean> {
    return this.db.tx(async (t) => {
      const [ring] = await t.all<{ slots: number }>('SELECT slots FROM history_ring');
      if (ring && Number(ring.slots) === keep) return false;
      await t.run(
        `UPDATE run_history SET slot = -1 - ((r.recorded - 1 - r.age) % ?)
        FROM (SELECT h.query_name, h.version, h.slot, v.runs_recorded AS recorded,
                ROW_NUMBER() OVER (PARTITION BY h.query_name, h.version ORDER BY h.event_id DESC) - 1 AS age
              FROM run_history h JOIN saved_query_versions v ON v.query_name = h.query_name AND v.version = h.version) r
        WHERE run_history.query_name = r.query_name AND run_history.version = r.version AND run_history.slot = r.slot
          AND r.age < ?`,
        [keep, keep],
      );
      await t.run(`DELETE FROM run_history WHERE slot >= 0 AND query_name <> '${ADHOC}'`);
      await t.run('UPDATE run_history SET slot = -1 - slot WHERE slot < 0');
      await t.run('DELETE FROM history_ring');
      await t.run('INSERT INTO history_ring (slots) VALUES (?)', [keep]);
      return true;
    });
  }

  /**
   * The newest `perQuery` runs of each saved query executed at or after `since`, newest first (every
   * version's ring together), at most `limit` rows in all: what GET /api/v1/alerts judges queries
   * and connections by.
   */
  async recentRuns(since: string, perQuery: number, limit: number): Promise<RecentRun[]> {
    const rows = await this.db.all<{ query_name: string; version: number; event_id: number; executed_at: string; status: string; entry_json: string }>(
      `SELECT query_name, version, event_id, executed_at, status, entry_json FROM (
         SELECT query_name, version, event_id, executed_at, status, entry_json,
           ROW_NUMBER() OVER (PARTITION BY query_name ORDER BY event_id DESC) AS n
         FROM run_history WHERE executed_at >= ?) r
       WHERE n <= ? ORDER BY event_id DESC LIMIT ?`,
      [since, perQuery, limit],
    );
    return rows.map((r) => {
      const e = JSON.parse(r.entry_json) as { connection_name?: string | null; code?: string; duration_ms?: number | null };
      return {
        query: r.query_name,
        version: Number(r.version),
        eventId: Number(r.event_id),
        executedAt: r.executed_at,
        ok: r.status === 'success',
        connection: e.connection_name ?? null,
        code: e.code ?? null,
        durationMs: typeof e.duration_ms === 'number' ? e.duration_ms : null,
      };
    });
  }

  async listHistory(f: HistoryFilter): Promise<HistoryEntry[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    const add = (clause: string, value: unknown) => {
      where.push(clause);
      params.push(value);
    };
    if (f.query !== undefined) add('query_name = ?', f.query);
    if (f.kind !== undefined) where.push(f.kind === 'adhoc' ? `query_name = '${ADHOC}'` : `query_name <> '${ADHOC}'`);
    if (f.version !== undefined) add('version = ?', f.version);
    if (f.status !== undefined) add('status = ?', f.status);
    if (f.key !== undefined) add('key_name = ?', f.key);
    if (f.since !== undefined) add('executed_at >= ?', f.since);
    if (f.until !== undefined) add('executed_at < ?', f.until);
    if (f.before !== undefined) add('event_id < ?', f.before);
    params.push(f.limit);
    const rows = await this.db.all<HistoryRow>(
      `SELECT event_id AS id, query_name, executed_at, status, key_name, entry_json FROM run_history ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY event_id DESC LIMIT ?`,
      params,
    );
    return rows.map(historyEntry);
  }
}

const HISTORY_COLUMNS = 8;
/** The query name ad-hoc runs are kept under: not a name a saved query can have. */
const ADHOC = '';
const ADHOC_SPLIT = 2 ** 31;
/** QUERYAPIGATE_HISTORY_ADHOC_LIMIT's default. */
const ADHOC_KEEP_DEFAULT = 1000;

/** Drops every ad-hoc run older than the newest `keep` (one walk down the key's end). */
async function trimAdhoc(t: SqlDb, keep: number): Promise<void> {
  const [edge] = await t.all<{ version: number; slot: number }>(
    `SELECT version, slot FROM run_history WHERE query_name = '${ADHOC}' ORDER BY version DESC, slot DESC LIMIT 1 OFFSET ?`,
    [keep],
  );
  if (!edge) return;
  await t.run(`DELETE FROM run_history WHERE query_name = '${ADHOC}' AND (version < ? OR (version = ? AND slot <= ?))`, [
    edge.version,
    edge.version,
    edge.slot,
  ]);
}
/**
 * Runs as the ring will take them, oldest first: their event ids and the runs themselves, whose entries (payloadJson)
 * are made when they are written, for the runs the ring keeps only (of the seeds' lookup, 50 in a batch of 5,000).
 * At most twice `keep` a version are held.
 */
interface KeptRuns {
  ids: number[];
  runs: RunRecord[];
}
const keptRuns = (): KeptRuns => ({ ids: [], runs: [] });

/** A version's runs in a HistoryBatch: how many, and the newest of them. */
interface VersionRuns extends KeptRuns {
  query: string;
  version: number;
  count: number;
}

/**
 * Runs waiting for the history rings, gathered as they come: per version how many, and only its newest
 * `keep` (a ring holds no more); of the ad-hoc runs, the newest `adhocKeep`. However many runs wait, it holds
 * about what the rings will: where the recorder shares the acceptor's thread, every run held until the
 * next history write outlives V8's young generation and is copied into the old one.
 */
export class HistoryBatch {
  /** Runs added. */
  size = 0;
  /** Runs held (the newest of each version, at most twice `keep` of it): what the recorder's pending bound counts. */
  held = 0;
  readonly versions = new Map<string, VersionRuns>();
  readonly adhoc: KeptRuns = keptRuns();
  /**
   * The version the last run was of. Runs come in stretches of one version (a batch is one executor's calls), and
   * making and hashing the key's text for each run had been about a quarter of a µs a run in a profile of the
   * recorder on the acceptor's thread (V8's, which counts wall time).
   */
  #last: VersionRuns | undefined;

  constructor(
    readonly keep: number,
    readonly adhocKeep = ADHOC_KEEP_DEFAULT,
  ) {}

  /** A run already in the event log as event `id`. Runs of neither kind are counted, not kept. */
  add(run: RunRecord, id: number): void {
    this.size++;
    if (run.query === null || run.version === null) {
      if (run.kind === 'adhoc') this.held += keepNewest(this.adhoc, run, id, this.adhocKeep);
      return;
    }
    let v = this.#last;
    if (v === undefined || v.query !== run.query || v.version !== run.version) {
      const k = `${run.query}\u0000${run.version}`;
      v = this.versions.get(k);
      if (!v) {
        v = { query: run.query, version: run.version, count: 0, ...keptRuns() };
        this.versions.set(k, v);
      }
      this.#last = v;
    }
    v.count++;
    this.held += keepNewest(v, run, id, this.keep);
  }
}

/**
 * Appends, dropping the oldest beyond `keep` a half-batch at a time (at most 2 × keep held), not one by one. Returns
 * how many more runs k holds: 1, or less when some were dropped.
 */
function keepNewest(k: KeptRuns, run: RunRecord, id: number, keep: number): number {
  k.ids.push(id);
  k.runs.push(run);
  if (k.ids.length < 2 * keep) return 1;
  const drop = k.ids.length - keep;
  k.ids.splice(0, drop);
  k.runs.splice(0, drop);
  return 1 - drop;
}

/** Calls `row` for a version's kept runs that its ring keeps (the newest `keep`): j, the run's place among the version's runs, and i, its place in v. */
function forKept(v: VersionRuns, keep: number, row: (j: number, i: number) => void): void {
  const before = v.count - v.ids.length; // runs counted but no longer held
  for (let i = Math.max(0, v.ids.length - keep); i < v.ids.length; i++) row(before + i, i);
}

/**
 * The ring's rows as columns: query, version, slot, event id, and the run, whose executed_at, status, key and entry
 * (payloadJson) are read as its row is written: on PostgreSQL a COPY piece a turn of the event loop (copyData), so
 * thousands of entries (a batch spread over many versions) do not hold the thread that serves calls at once.
 */
type HistoryColumns = [string[], number[], number[], number[], RunRecord[]];
const historyColumns = (): HistoryColumns => [[], [], [], [], []];

/** Kept run i of k as a row of the ring's columns. */
function pushRow(cols: HistoryColumns, query: string, version: number, slot: number, k: KeptRuns, i: number): void {
  cols[0].push(query);
  cols[1].push(version);
  cols[2].push(slot);
  cols[3].push(k.ids[i]);
  cols[4].push(k.runs[i]);
}

/**
 * A history row as the API gives it: entries written since the event payload became the entry hold only
 * the fields without a column (older ones hold all, which then agree with the columns).
 */
interface HistoryRow {
  id: number | string;
  query_name: string;
  executed_at: string;
  status: 'success' | 'error';
  key_name: string | null;
  entry_json: string;
}
function historyEntry(r: HistoryRow): HistoryEntry {
  return runOf(r.id, r.query_name === ADHOC ? null : r.query_name, r.executed_at, r.status, r.key_name, r.entry_json);
}

/** SQLite: upserts rows given as columns (pushRow's). */
async function upsertRowsSqlite(t: SqlDb, cols: HistoryColumns): Promise<void> {
  const n = cols[0].length;
  const writes: Promise<number>[] = [];
  for (let at = 0; at < n; ) {
    const rows = nextPiece(n - at, SQLITE_HISTORY_PIECE);
    const params = new Array<unknown>(rows * HISTORY_COLUMNS);
    for (let r = 0, p = 0; r < rows; r++) {
      const run = cols[4][at + r];
      params[p++] = cols[0][at + r];
      params[p++] = cols[1][at + r];
      params[p++] = cols[2][at + r];
      params[p++] = cols[3][at + r];
      params[p++] = run.executed_at;
      params[p++] = run.status;
      params[p++] = run.key_name;
      params[p++] = payloadJson(run);
    }
    writes.push(t.run(upsertHistorySqlite(rows), params));
    at += rows;
  }
  await Promise.all(writes);
}

/**
 * SQLite: one counter update per version (in-process, so a statement each costs little: a few hundred
 * at once in UPDATE ... FROM VALUES measured no better), then the kept runs upserted. Run j of a group
 * of g is number (counter - g + j) of its version, in slot number % keep.
 */
async function savedRunsSqlite(t: SqlDb, versions: Map<string, VersionRuns>, keep: number): Promise<number> {
  const cols = historyColumns();
  for (const v of versions.values()) {
    const [c] = await t.all<{ n: number }>(
      'UPDATE saved_query_versions SET runs_recorded = runs_recorded + ? WHERE query_name = ? AND version = ? RETURNING runs_recorded AS n',
      [v.count, v.query, v.version],
    );
    if (!c) continue; // the query was deleted meanwhile
    const first = Number(c.n) - v.count;
    forKept(v, keep, (j, i) => pushRow(cols, v.query, v.version, (first + j) % keep, v, i));
  }
  if (cols[0].length) await upsertRowsSqlite(t, cols);
  return cols[0].length;
}

/**
 * PostgreSQL: every kept run sent by COPY to a staging table of this session (pg_temp.history_stage, emptied at
 * commit), then the saved runs' rings written in one statement whatever the number of versions, and the ad-hoc
 * runs in another. A saved run's slot column holds j, its place among its version's runs; the statement turns it
 * into the slot: the counters are locked in key order (so two instances sharing a store cannot deadlock),
 * advanced by each version's count, and each version's first run of the batch gets the number its counter had.
 * Runs of a version deleted meanwhile find no counter and are skipped. Returns the rows written.
 * COPY and a staged table, not arrays to unnest: the server parsed 8 arrays of a batch's texts and held their rows
 * in a tuple store for the join (a quarter of its CPU in a profile); the whole way, the store's PostgreSQL 11.3 → 9.4
 * µs a run, lower in every round, the recorder's own CPU unchanged within the noise (bench/results/recorder-2026-12-04-stop44-5).
 */
async function historyPg(t: SqlDb, versions: Map<string, VersionRuns>, keep: number, adhoc: HistoryColumns, adhocKeep: number): Promise<number> {
  const adhocCount = adhoc[0].length;
  const rows = adhoc; // and the saved runs' after them
  const gq: string[] = [];
  const gv: number[] = [];
  const gn: number[] = [];
  for (const v of versions.values()) {
    gq.push(v.query);
    gv.push(v.version);
    gn.push(v.count);
    forKept(v, keep, (j, i) => pushRow(rows, v.query, v.version, j, v, i));
  }
  await t.run(STAGE_PG);
  await t.copyIn(
    `COPY pg_temp.history_stage FROM STDIN`,
    copyData(rows[0].length, (r) => {
      const run = rows[4][r];
      return `${copyField(rows[0][r])}\t${rows[1][r]}\t${rows[2][r]}\t${rows[3][r]}\t${copyField(run.executed_at)}\t${copyField(run.status)}\t${copyField(run.key_name)}\t${copyJson(payloadJson(run))}\n`;
    }),
  );
  let n = 0;
  if (gq.length) n += Number((await t.all<{ n: number }>(SAVED_RUNS_PG, [gq, gv, gn, keep]))[0].n);
  if (adhocCount) {
    n += await t.run(ADHOC_RUNS_PG);
    await trimAdhoc(t, adhocKeep);
  }
  return n;
}

/** PostgreSQL: the session's staging table for historyPg, the ring's columns with no key; COPY fills it, commit empties it. */
const STAGE_PG = `CREATE TEMP TABLE IF NOT EXISTS history_stage (q TEXT COLLATE "C", v INTEGER, s INTEGER, id BIGINT,
  at TEXT, st TEXT, k TEXT, e TEXT) ON COMMIT DELETE ROWS`;
const HISTORY_UPSERT = `INSERT INTO run_history (query_name, version, slot, event_id, executed_at, status, key_name, entry_json)`;
const HISTORY_ON_CONFLICT = `ON CONFLICT (query_name, version, slot) DO UPDATE SET event_id = excluded.event_id,
  executed_at = excluded.executed_at, status = excluded.status, key_name = excluded.key_name, entry_json = excluded.entry_json`;
/** PostgreSQL: the transaction commits asynchronously (synchronous_commit off, as history writes do). */
const ASYNC_COMMIT = `(SELECT set_config('synchronous_commit', 'off', true)) AS cfg`;
/**
 * PostgreSQL: the saved runs' counters and rings from the staged rows (historyPg). `locked` takes the counters' row
 * locks in key order before the UPDATE touches them; `c` gives each version the number its first run of the batch gets.
 */
const SAVED_RUNS_PG = `WITH g AS (SELECT * FROM unnest(?::text[], ?::int[], ?::int[]) AS g(q, v, n)),
  locked AS MATERIALIZED (SELECT s.query_name, s.version FROM saved_query_versions s JOIN g ON s.query_name = g.q AND s.version = g.v
             ORDER BY s.query_name, s.version FOR UPDATE OF s),
  c AS (UPDATE saved_query_versions s SET runs_recorded = s.runs_recorded + g.n FROM g, locked
        WHERE s.query_name = g.q AND s.version = g.v AND locked.query_name = g.q AND locked.version = g.v
        RETURNING s.query_name AS q, s.version AS v, s.runs_recorded - g.n AS first),
  w AS (${HISTORY_UPSERT}
    SELECT u.q, u.v, ((c.first + u.s) % ?::int)::int, u.id, u.at, u.st, u.k, u.e
      FROM pg_temp.history_stage u JOIN c ON c.q = u.q AND c.v = u.v, ${ASYNC_COMMIT}
    ${HISTORY_ON_CONFLICT}
    RETURNING 1)
  SELECT count(*)::int AS n FROM w`;
/** PostgreSQL: the staged ad-hoc runs (their slots given) into their list (historyPg). */
const ADHOC_RUNS_PG = `${HISTORY_UPSERT}
  SELECT u.q, u.v, u.s, u.id, u.at, u.st, u.k, u.e FROM pg_temp.history_stage u, ${ASYNC_COMMIT}
   WHERE u.q = '${ADHOC}'
  ${HISTORY_ON_CONFLICT}`;
/** SQLite: multi-row VALUES, at most 120 rows (960 markers, under the classic 999) in a few piece sizes. */
const SQLITE_HISTORY_PIECE = 120;
const sqliteUpserts = new Map<number, string>();
function upsertHistorySqlite(rows: number): string {
  let text = sqliteUpserts.get(rows);
  if (!text) {
    text = `${HISTORY_UPSERT} VALUES ${valuesList(rows, HISTORY_COLUMNS)} ${HISTORY_ON_CONFLICT}`;
    sqliteUpserts.set(rows, text);
  }
  return text; // bounded: one text per piece size nextPiece makes
}

async function insertVersion(t: SqlDb, name: string, version: number, f: VersionFields & { uuid: string }, publish: boolean, now: string) {
  const fields: VersionFields = {
    sql: f.sql,
    connection_name: f.connection_name,
    parameters: f.parameters,
    description: f.description,
    author: f.author,
    tags: f.tags,
    cache_ttl: f.cache_ttl,
  };
  await t.run(
    'INSERT INTO saved_query_versions (query_name, version, uuid, was_published, created_at, last_modified_at, fields_json) VALUES (?, ?, ?, ?, ?, ?, ?)',
    [name, version, f.uuid, publish ? 1 : 0, now, now, JSON.stringify(fields)],
  );
}

function toConnection(r: ConnectionRecord): ConnectionRow {
  const d = JSON.parse(r.details_json);
  return {
    name: r.name,
    db: r.db,
    active: bool(r.active),
    host: d.host ?? null,
    port: d.port ?? null,
    database: d.database ?? null,
    user: d.user ?? null,
    password: d.password ?? null,
    options: d.options ?? null,
    example: bool(r.example),
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

function toVersion(r: VersionRecord): VersionRow {
  return {
    ...JSON.parse(r.fields_json),
    version: Number(r.version),
    uuid: r.uuid,
    was_published: bool(r.was_published),
    created_at: r.created_at,
    last_modified_at: r.last_modified_at,
  };
}

function toQuery(r: QueryRecord, versions: VersionRow[]): QueryRow {
  return {
    name: r.name,
    collection: r.collection ?? null,
    example: bool(r.example),
    published_version: r.published_version === null ? null : Number(r.published_version),
    created_at: r.created_at,
    updated_at: r.updated_at,
    versions,
  };
}

/** The grant fields as stored (details_json), whatever else the row carries. */
function grantsOf(k: KeyGrants): KeyGrants {
  return {
    connections: k.connections,
    queries: k.queries,
    collections: k.collections ?? [],
    allow_writes: k.allow_writes,
    allowed_write_ops: k.allowed_write_ops,
    allowed_tables: k.allowed_tables,
    mask: k.mask,
    mask_predicates: k.mask_predicates,
    rate_limit: k.rate_limit,
    rate_limits: k.rate_limits,
    allowed_ips: k.allowed_ips,
  };
}

interface RoleRecord {
  name: string;
  example: number;
  keys_created: number;
  created_at: string;
  updated_at: string;
  details_json: string;
}

function toRole(r: RoleRecord): RoleRow {
  return {
    collections: [],
    ...JSON.parse(r.details_json),
    name: r.name,
    example: bool(r.example),
    keys_created: Number(r.keys_created),
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

function toKey(r: KeyRecord): KeyRow {
  return {
    collections: [],
    created_from_role: null,
    ...JSON.parse(r.details_json),
    name: r.name,
    hash: r.hash,
    active: bool(r.active),
    expires_at: r.expires_at ?? null,
    example: bool(r.example),
    created_at: r.created_at,
    updated_at: r.updated_at,
    last_used_at: r.last_used_at ?? null,
    previous_until: r.previous_until === null || r.previous_until === undefined ? null : Number(r.previous_until),
    via_previous: bool(r.via_previous),
  };
}
