// In charge of `queryapigate backup`, `restore` and `migrate-to-postgres`: a consistent copy of the
// whole store to a file (SQLite's online backup, or a JSON dump of a PostgreSQL store read in one
// snapshot), that copy written into an empty store, and a SQLite store copied into a PostgreSQL one.
// They open the store themselves (no server needed); keys keep their hashes, so their secrets keep working.
import { chmodSync, closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Config } from '../config.js';
import {
  backupSqlite,
  type CopyReport,
  DumpError,
  dumpStore,
  isSqliteFile,
  readDump,
  restoreStore,
  type StoreDump,
  StoreNotEmptyError,
  tableRows,
} from '../store/copy.js';
import { openSqlite } from '../store/sql.js';
import { localTimestamp, openStore, STORE_FILE } from '../store/store.js';
import { openLocal } from './local.js';
import { printJson } from './print.js';
import { commandConfig, redactUrl, storeName } from './settings.js';
import { type Command, Failure, JSON_OUTPUT, UsageError } from './tree.js';

const FORCE_OVERWRITE = { type: 'boolean', help: 'replace FILE if it exists' } as const;
const FORCE_REPLACE = { type: 'boolean', help: 'replace what the target store holds (by default only an empty store is written)' } as const;

/** "3 connections, 12 saved queries, ..." from a copy's row counts (the tables a user knows). */
function summary(rows: Record<string, number>): string {
  const n = (t: string) => rows[t] ?? 0;
  const events = Object.entries(rows)
    .filter(([t]) => /^events_\d+$/.test(t))
    .reduce((a, [, c]) => a + c, 0);
  return `${n('connections')} connections, ${n('saved_queries')} saved queries (${n('saved_query_versions')} versions), ${n('api_keys')} keys, ${n('run_history')} history runs, ${events} events`;
}

const counts = (dump: StoreDump) => Object.fromEntries(Object.entries(dump.tables).map(([t, v]) => [t, tableRows(t, v)]));

/** Copies the SQLite store with the online backup to a file of its own, readable by its owner only. */
async function sqliteCopy(config: Config, to: string): Promise<void> {
  const file = join(config.home, STORE_FILE);
  if (!existsSync(file)) throw new Failure(`there is no store at ${file} (QUERYAPIGATE_HOME)`);
  await backupSqlite(file, to);
  chmodSync(to, 0o600);
}

/** Reads a backup file (a SQLite file or a JSON dump) as a dump. */
async function readBackup(file: string): Promise<StoreDump> {
  if (!existsSync(file)) throw new Failure(`${file}: no such file`);
  const head = Buffer.alloc(16);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, head, 0, 16, 0);
  } finally {
    closeSync(fd);
  }
  if (isSqliteFile(head)) {
    const db = openSqlite(file, { readonly: true });
    try {
      return await dumpStore(db, localTimestamp());
    } finally {
      await db.close();
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Failure(`${file}: not a store backup (${(e as Error).message})`);
  }
  return readDump(parsed);
}

/** The copy's own errors as one line (exit 1). */
function asFailure(e: unknown): never {
  if (e instanceof StoreNotEmptyError || e instanceof DumpError) throw new Failure(e.message);
  throw e;
}

/** Opens a PostgreSQL store for a copy; one that cannot be opened is one line naming `label`. */
function openPostgresStore(config: Parameters<typeof openStore>[0], label: string): ReturnType<typeof openStore> {
  return openStore(config).catch((e: Error) => {
    throw new Failure(`${label}: the store could not be opened: ${e.message}`);
  });
}

/** Writes `dump` into `db` (an empty store, unless `force`), then `done`; `close` runs whatever happens. */
async function writeInto(
  db: Parameters<typeof restoreStore>[0],
  dump: StoreDump,
  force: unknown,
  { done, close }: { done?: () => void; close: () => Promise<unknown> },
): Promise<CopyReport> {
  try {
    const report = await restoreStore(db, dump, { force: Boolean(force) }).catch(asFailure);
    done?.();
    return report;
  } finally {
    await close();
  }
}

const backup: Command = {
  kind: 'command',
  name: 'backup',
  summary: 'Write a consistent copy of the whole store to a file',
  usage: 'FILE [options]',
  description: [
    'Opens the store itself (no server needed; one may be running). A SQLite store is copied with',
    "SQLite's online backup (FILE is a SQLite database); a PostgreSQL store is written as one JSON document",
    'of every store table, read in one REPEATABLE READ transaction. FILE holds key hashes, connection',
    'settings (with their passwords) and the store secrets: it is made readable by its owner only.',
  ],
  args: { min: 1, max: 1 },
  options: { force: FORCE_OVERWRITE, json: JSON_OUTPUT },
  examples: ['queryapigate backup /var/backups/qag-$(date +%F).db', 'queryapigate backup qag.json   # with QUERYAPIGATE_DATABASE_URL set: a JSON dump'],
  async run(inv) {
    const file = inv.args[0];
    const config = commandConfig(inv.say);
    if (existsSync(file) && !inv.values.force) throw new Failure(`${file} exists: give --force to replace it`);
    inv.say(`store: ${storeName(config)} (opened directly)`);
    let rows: Record<string, number>;
    if (!config.databaseUrl) {
      rmSync(file, { force: true });
      await sqliteCopy(config, file);
      rows = counts(await readBackup(file));
    } else {
      const store = await openPostgresStore(config, 'QUERYAPIGATE_DATABASE_URL');
      try {
        const dump = await dumpStore(store.db, localTimestamp());
        writeFileSync(file, `${JSON.stringify(dump)}\n`, { mode: 0o600 });
        chmodSync(file, 0o600);
        rows = counts(dump);
      } finally {
        await store.close();
      }
    }
    const format = config.databaseUrl ? 'json' : 'sqlite';
    const bytes = statSync(file).size;
    if (inv.values.json) printJson(inv.out, { file, format, bytes, rows });
    inv.say(`wrote ${file} (${format === 'sqlite' ? 'SQLite online backup' : 'JSON dump'}, ${bytes} bytes): ${summary(rows)}`);
  },
};

const restore: Command = {
  kind: 'command',
  name: 'restore',
  summary: 'Write a backup into the store (an empty one, unless --force)',
  usage: 'FILE [options]',
  description: [
    'FILE is what backup wrote: a SQLite file or a JSON dump, either one into a store of either engine',
    '(QUERYAPIGATE_HOME or QUERYAPIGATE_DATABASE_URL, made if missing). A store that holds connections,',
    'queries, keys or runs is refused unless --force, which replaces everything it holds. It is written in',
    'one transaction: all of it or nothing. Keys keep their hashes, so their secrets work as before.',
    'Stop the servers on the store first when replacing it; running servers are told of the change.',
  ],
  args: { min: 1, max: 1 },
  options: { force: FORCE_REPLACE, json: JSON_OUTPUT },
  examples: ['queryapigate restore qag-2026-12-01.db', 'QUERYAPIGATE_HOME=/srv/qag-new queryapigate restore qag.json --force'],
  async run(inv) {
    const config = commandConfig(inv.say);
    const dump = await readBackup(inv.args[0]).catch(asFailure);
    const local = await openLocal(config, inv.say);
    // Changed before the close, which announces it to running servers.
    const report = await writeInto(local.store.db, dump, inv.values.force, { done: () => local.changed(), close: () => local.close() });
    if (inv.values.json) printJson(inv.out, { file: inv.args[0], ...report });
    inv.say(`restored ${inv.args[0]} into ${storeName(config)}${report.replaced ? ', replacing what it held' : ''}: ${summary(report.rows)}`);
  },
};

const migrateToPostgres: Command = {
  kind: 'command',
  name: 'migrate-to-postgres',
  summary: 'Copy the SQLite store into a PostgreSQL store',
  usage: 'URL [options]',
  description: [
    "Reads the SQLite store of QUERYAPIGATE_HOME (through SQLite's online backup, so a server may be running)",
    "and writes all of it into the PostgreSQL database at URL, after applying the store's migrations there:",
    'connections, saved queries and their versions, keys (same hashes: their secrets keep working), history,',
    'the event log and its id sequence. The database must be empty of store rows unless --force.',
    'Then start the servers with QUERYAPIGATE_DATABASE_URL=URL.',
  ],
  args: { min: 1, max: 1 },
  options: { force: FORCE_REPLACE, json: JSON_OUTPUT },
  examples: ['queryapigate migrate-to-postgres postgres://qag@db:5432/qag', 'queryapigate migrate-to-postgres postgres://qag@db:5432/qag --force --json'],
  async run(inv) {
    const url = inv.args[0];
    if (!/^postgres(ql)?:\/\//.test(url))
      throw new UsageError(`URL must be a postgres:// or postgresql:// URL: got '${redactUrl(url)}'`, 'queryapigate migrate-to-postgres');
    const config = commandConfig(inv.say);
    if (config.databaseUrl)
      throw new Failure('QUERYAPIGATE_DATABASE_URL is set: the store is PostgreSQL already; this command copies a SQLite store (unset it)');
    inv.say(`from: ${storeName(config)} (opened directly)`);
    inv.say(`to: PostgreSQL ${redactUrl(url)}`);
    const folder = mkdtempSync(join(tmpdir(), 'qag-migrate-'));
    let dump: StoreDump;
    try {
      await sqliteCopy(config, join(folder, STORE_FILE));
      dump = await readBackup(join(folder, STORE_FILE));
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
    const target = await openPostgresStore({ home: config.home, databaseUrl: url, connectTimeout: config.connectTimeout }, redactUrl(url));
    const report = await writeInto(target.db, dump, inv.values.force, { close: () => target.close() });
    if (inv.values.json) printJson(inv.out, { from: join(config.home, STORE_FILE), to: redactUrl(url), ...report });
    inv.say(`copied into PostgreSQL ${redactUrl(url)}: ${summary(report.rows)}`);
    inv.say(`next: start the servers with QUERYAPIGATE_DATABASE_URL set to this URL`);
  },
};

export const STORE_COPY_COMMANDS = [backup, restore, migrateToPostgres];
