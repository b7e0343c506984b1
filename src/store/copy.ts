// In charge of copying a whole store: SQLite's online backup of the store file, a JSON dump of every
// store table read in one snapshot (PostgreSQL: one REPEATABLE READ transaction), and writing such a
// copy into an empty store of either engine (backup, restore, migrate-to-postgres). Ids are kept as
// they are, and the event id source is set past the highest id copied, so event ids keep increasing.
import Database from 'better-sqlite3';
import { EventLog, SEGMENT_TABLE_NAME, segmentTableSql } from './events.js';
import { SCHEMA_VERSION } from './migrations.js';
import { nextPiece, type SqlDb, valuesList } from './sql.js';

export const DUMP_FORMAT = 'queryapigate-store/1';

/** The store's tables with rows of their own, in the order they are written (no foreign keys between them). */
const TABLES = [
  'connections',
  'saved_queries',
  'saved_query_versions',
  'api_keys',
  'store_secrets',
  'run_history',
  'history_ring',
  'event_segments',
  'administrators',
  'admin_tokens',
  'audit_log',
  'audit_chain',
  'key_roles',
];
/** Tables whose rows mean the store is in use: a restore into it needs --force. */
const CONTENT = ['connections', 'saved_queries', 'api_keys', 'key_roles', 'run_history', 'event_segments', 'administrators', 'audit_log'];
/** Markers per multi-row INSERT: under SQLite's classic limit of 999. */
const MARKERS = 900;

export interface StoreDump {
  format: typeof DUMP_FORMAT;
  /** The engine it was read from. */
  dialect: SqlDb['dialect'];
  schema_version: number;
  made_at: string;
  /** The highest event id handed out; the restored store continues after it. */
  last_event_id: number;
  /** Every store table (the event log's segments included): its columns and rows. */
  tables: Record<string, { columns: string[]; rows: unknown[][] }>;
}

/** What a write of a copy did, table by table. */
export interface CopyReport {
  /** Rows written, table by table; for an event segment's table, the events its rows hold (tableRows). */
  rows: Record<string, number>;
  last_event_id: number;
  /** True when the target held rows that were replaced (--force). */
  replaced: boolean;
}

export class StoreNotEmptyError extends Error {}
export class DumpError extends Error {}

/** Copies the live SQLite store file `from` to `to` with SQLite's online backup (consistent while in use). */
export async function backupSqlite(from: string, to: string): Promise<void> {
  const db = new Database(from, { readonly: true, fileMustExist: true });
  try {
    await db.backup(to);
  } finally {
    db.close();
  }
}

/** True when the file starts with SQLite's header (a backup made by backupSqlite), not a JSON dump. */
export function isSqliteFile(head: Buffer): boolean {
  return head.subarray(0, 16).toString('latin1') === 'SQLite format 3\u0000';
}

/**
 * Every store table's rows, read in one snapshot: on PostgreSQL one REPEATABLE READ transaction; a
 * SQLite file is read as it is, so it must be one nothing writes to (a backup, see backupSqlite).
 */
export async function dumpStore(db: SqlDb, madeAt: string): Promise<StoreDump> {
  if (db.dialect === 'sqlite') return readTables(db, madeAt);
  return db.tx(async (t) => {
    await t.run('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    return readTables(t, madeAt);
  });
}

async function readTables(t: SqlDb, madeAt: string): Promise<StoreDump> {
  const [{ version }] = await t.all<{ version: number }>('SELECT version FROM schema_version');
  const present = new Set(await tableNames(t));
  const names = [...TABLES.filter((n) => present.has(n)), ...[...present].filter((n) => SEGMENT_TABLE_NAME.test(n)).sort()];
  const tables: StoreDump['tables'] = {};
  for (const name of names) {
    const rows = await t.all<Record<string, unknown>>(`SELECT * FROM ${name}`);
    const columns = rows.length ? Object.keys(rows[0]) : [];
    tables[name] = { columns, rows: rows.map((r) => columns.map((c) => r[c])) };
  }
  return { format: DUMP_FORMAT, dialect: t.dialect, schema_version: Number(version), made_at: madeAt, last_event_id: await lastEventId(t, present), tables };
}

/** Checks a parsed file is a dump this release can restore; the dump, typed. */
export function readDump(value: unknown): StoreDump {
  const d = value as Partial<StoreDump> | null;
  if (!d || typeof d !== 'object' || d.format !== DUMP_FORMAT || typeof d.tables !== 'object' || d.tables === null) {
    throw new DumpError(`not a store backup: a ${DUMP_FORMAT} JSON document or a SQLite file was expected`);
  }
  checkVersion(d as StoreDump);
  for (const [name, t] of Object.entries(d.tables)) {
    if (!TABLES.includes(name) && !SEGMENT_TABLE_NAME.test(name)) throw new DumpError(`the backup holds a table this store does not have: ${name}`);
    if (!Array.isArray(t?.columns) || !Array.isArray(t?.rows)) throw new DumpError(`the backup's table ${name} has no columns and rows`);
  }
  return d as StoreDump;
}

function checkVersion(d: StoreDump): void {
  if (d.schema_version !== SCHEMA_VERSION) {
    throw new DumpError(`the copy has schema version ${d.schema_version}, this release ${SCHEMA_VERSION}: restore it with the release that made it`);
  }
}

/**
 * Writes `dump` into `db` (a migrated store of either engine) in one transaction. A store holding
 * connections, queries, keys or runs is refused unless `force`, which replaces what it holds.
 */
export async function restoreStore(db: SqlDb, dump: StoreDump, opts: { force: boolean }): Promise<CopyReport> {
  checkVersion(dump);
  // The event log's catalog and id source, as a server would make them.
  await EventLog.open(db, { retentionS: 3600 });
  return db.tx(async (t) => {
    const present = await tableNames(t);
    const held: string[] = [];
    for (const name of CONTENT) {
      const [{ n }] = await t.all<{ n: number }>(`SELECT COUNT(*) AS n FROM ${name}`);
      if (Number(n) > 0) held.push(`${Number(n)} ${name.replaceAll('_', ' ')}`);
    }
    if (held.length && !opts.force)
      throw new StoreNotEmptyError(`the store is not empty (${held.join(', ')}): restore only into an empty store, or give --force to replace it`);
    for (const name of TABLES) await t.run(`DELETE FROM ${name}`);
    for (const name of present.filter((n) => SEGMENT_TABLE_NAME.test(n))) await t.run(`DROP TABLE ${name}`);

    const rows: Record<string, number> = {};
    let highest = dump.last_event_id;
    for (const [name, table] of Object.entries(dump.tables)) {
      if (SEGMENT_TABLE_NAME.test(name)) await t.run(segmentTableSql(t.dialect, name));
      await insertRows(t, name, table.columns, table.rows);
      rows[name] = tableRows(name, table);
      const idColumn = name === 'run_history' ? 'event_id' : name === 'event_segments' ? 'last_id' : null;
      const at = idColumn ? table.columns.indexOf(idColumn) : -1;
      for (const r of at >= 0 ? table.rows : []) highest = Math.max(highest, Number(r[at] ?? 0));
      if (SEGMENT_TABLE_NAME.test(name)) for (const [, last] of segmentRowIds(table)) highest = Math.max(highest, last);
    }
    if (t.dialect === 'sqlite') await t.run('UPDATE event_ids SET last_id = ? WHERE id = 1', [highest]);
    else if (highest > 0) await t.all("SELECT setval('event_ids', ?::bigint, true)", [highest]);
    return { rows, last_event_id: highest, replaced: held.length > 0 };
  });
}

/** A dumped table's rows, counted as a user reads them: an event segment's table counts the events its rows hold. */
export function tableRows(name: string, table: DumpTable): number {
  if (!SEGMENT_TABLE_NAME.test(name)) return table.rows.length;
  let n = 0;
  for (const [first, last] of segmentRowIds(table)) n += last - first + 1;
  return n;
}

type DumpTable = StoreDump['tables'][string];

/** Each row's first and last event id in an event segment's dumped table: a page row holds id..last_id, a row of the layout before pages its id. */
function segmentRowIds(table: DumpTable): Array<[number, number]> {
  const id = table.columns.indexOf('id');
  const last = table.columns.indexOf('last_id');
  return table.rows.map((r) => {
    const first = Number(r[id] ?? 0);
    return [first, last >= 0 && r[last] !== null && r[last] !== undefined ? Number(r[last]) : first];
  });
}

async function insertRows(t: SqlDb, table: string, columns: string[], rows: unknown[][]): Promise<void> {
  if (!rows.length) return;
  const max = Math.max(1, Math.floor(MARKERS / columns.length));
  const names = columns.map((c) => `"${c.replaceAll('"', '""')}"`).join(', ');
  for (let at = 0; at < rows.length; ) {
    const n = nextPiece(rows.length - at, max);
    await t.run(`INSERT INTO ${table} (${names}) VALUES ${valuesList(n, columns.length)}`, rows.slice(at, at + n).flat());
    at += n;
  }
}

async function tableNames(t: SqlDb): Promise<string[]> {
  const rows =
    t.dialect === 'sqlite'
      ? await t.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
      : await t.all<{ name: string }>('SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()');
  return rows.map((r) => r.name);
}

/** The id source's position: SQLite's counter row, PostgreSQL's sequence (0 when the log was never opened). */
async function lastEventId(t: SqlDb, present: Set<string>): Promise<number> {
  if (t.dialect === 'sqlite') {
    if (!present.has('event_ids')) return 0;
    const rows = await t.all<{ last_id: number }>('SELECT last_id FROM event_ids WHERE id = 1');
    return rows.length ? Number(rows[0].last_id) : 0;
  }
  const [{ seq }] = await t.all<{ seq: string | null }>("SELECT to_regclass('event_ids')::text AS seq");
  if (seq === null) return 0;
  const [r] = await t.all<{ last_value: number; is_called: boolean }>('SELECT last_value, is_called FROM event_ids');
  return r.is_called ? Number(r.last_value) : Number(r.last_value) - 1;
}
