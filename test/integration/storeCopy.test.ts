// `queryapigate backup`, `restore` and `migrate-to-postgres` as a user runs them (child processes),
// checked over HTTP: a server on the copy answers as the original did, with the same keys.
import assert from 'node:assert/strict';
import { copyFileSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { EXAMPLES_DB_FILE } from '../../src/examples/dataset.js';
import { DUMP_FORMAT, restoreStore, type StoreDump } from '../../src/store/copy.js';
import { migrate, SCHEMA_VERSION } from '../../src/store/migrations.js';
import { openSqlite } from '../../src/store/sql.js';
import { cli, ok, tempHome } from '../cli.js';
import { request, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const CALLS = ['/q/example_film_lookup?film_id=7', '/q/example_film_search?text=abc'];

/** A server with the examples, a key of our own, and a few runs in its history; what it shows then. */
async function original(env: Record<string, string> = {}) {
  const s = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: '1', ...env });
  const made = await s.call('POST', '/api/v1/api-keys', {
    body: { name: 'partner', queries: ['example_film_lookup', 'example_film_search'], connections: [] },
  });
  assert.equal(made.status, 201, made.text);
  const secret: string = made.json.secret;
  const answers = await answersOf(s, secret);
  return { s, secret, seen: { ...(await storeOf(s)), answers } };
}

/** The key's answers to CALLS (each call adds a run to the history). */
async function answersOf(s: TestServer, secret: string) {
  const answers = [];
  for (const path of CALLS) {
    const r = await request(s.url, 'GET', path, { key: secret });
    answers.push([r.status, r.json]);
  }
  return answers;
}

/** What the store shows through the API: queries, keys (without their last use) and the whole history (flushed first). */
async function storeOf(s: TestServer) {
  return {
    history: (await s.call('GET', '/api/v1/history')).json.items,
    queries: (await s.call('GET', '/api/v1/queries')).json,
    keys: (await s.call('GET', '/api/v1/api-keys')).json.items.map((k: Record<string, unknown>) => ({ ...k, last_used_at: null })),
  };
}

/** What a server on a copy shows: the store as copied, then its answers. */
async function view(s: TestServer, secret: string) {
  const store = await storeOf(s);
  return { ...store, answers: await answersOf(s, secret) };
}

/** A server on `home` (its SQLite store, or `databaseUrl`), with the examples' dataset beside it. */
async function serverOn(home: string, env: Record<string, string> = {}) {
  return startTestServer({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: '1', ...env });
}

test('backup of a SQLite store (online, server running), restore into a fresh home: the same keys work and the same answers come back', async () => {
  const { s, secret, seen } = await original();
  const target = tempHome();
  const file = join(tempHome(), 'qag.db');
  try {
    const made = await cli(['backup', file, '--json'], { home: s.home });
    assert.equal(made.code, 0, made.stderr);
    assert.match(made.stderr, new RegExp(`store: SQLite ${s.home}/queryapigate\\.db \\(opened directly\\)`));
    assert.match(
      made.stderr,
      /wrote .*qag\.db \(SQLite online backup, \d+ bytes\): 1 connections, \d+ saved queries \(\d+ versions\), \d+ keys, \d+ history runs/,
    );
    assert.equal(readFileSync(file).subarray(0, 15).toString(), 'SQLite format 3');
    assert.equal(statSync(file).mode & 0o777, 0o600, 'readable by its owner only: it holds hashes and passwords');
    const report = JSON.parse(made.stdout);
    assert.equal(report.format, 'sqlite');
    assert.ok(report.rows.api_keys >= 1 && report.rows.run_history >= CALLS.length, made.stdout);
    const again = await cli(['backup', file], { home: s.home });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /exists: give --force to replace it/);

    // The store holds the connection, not the data source's file: the dataset goes along by hand.
    copyFileSync(join(s.home, EXAMPLES_DB_FILE), join(target, EXAMPLES_DB_FILE));
    const restored = await cli(['restore', file], { home: target });
    assert.equal(restored.code, 0, restored.stderr);
    assert.match(restored.stderr, new RegExp(`restored .*qag\\.db into SQLite ${target}/queryapigate\\.db: 1 connections`));

    const copy = await serverOn(target);
    try {
      assert.deepEqual(await view(copy, secret), seen, 'same answers, queries, keys and history');
    } finally {
      await copy.stop();
    }

    const refused = await cli(['restore', file], { home: target });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^error: the store is not empty \(1 connections, \d+ saved queries, \d+ api keys, 1 key roles, \d+ run history/m);
    const forced = await cli(['restore', file, '--force'], { home: target });
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stderr, /replacing what it held/);
  } finally {
    await s.stop();
    rmSync(target, { recursive: true, force: true });
    rmSync(join(file, '..'), { recursive: true, force: true });
  }
});

test('backup of a PostgreSQL store is a JSON dump; restored into a fresh PostgreSQL store and a SQLite home, the same answers come back', async () => {
  const from = await scratchDatabase('qag_backup_from');
  const into = await scratchDatabase('qag_backup_into');
  const { s, secret, seen } = await original({ QUERYAPIGATE_DATABASE_URL: from.url });
  const folder = tempHome();
  const file = join(folder, 'qag.json');
  try {
    const made = await cli(['backup', file], { home: s.home, env: { QUERYAPIGATE_DATABASE_URL: from.url } });
    assert.equal(made.code, 0, made.stderr);
    assert.match(made.stderr, /store: PostgreSQL postgres:\/\/postgres@127\.0\.0\.1:5432\/qag_backup_from_\S+ \(opened directly\)/);
    assert.match(made.stderr, /\(JSON dump, \d+ bytes\)/);
    const dump = JSON.parse(readFileSync(file, 'utf8'));
    assert.equal(dump.format, 'queryapigate-store/1');
    assert.equal(dump.dialect, 'postgres');
    assert.ok(dump.tables.api_keys.rows.length >= 1 && dump.last_event_id >= CALLS.length);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    // Events are counted one by one, not as the pages that hold them: each call is an event and a history run.
    const events = Number(/, (\d+) events/.exec(made.stderr)?.[1]);
    assert.ok(events >= CALLS.length, made.stderr);
    assert.equal(events, dump.tables.run_history.rows.length, made.stderr);

    for (const env of [{ QUERYAPIGATE_DATABASE_URL: into.url }, {}] as Array<Record<string, string>>) {
      const home = tempHome();
      try {
        copyFileSync(join(s.home, EXAMPLES_DB_FILE), join(home, EXAMPLES_DB_FILE));
        await ok(['restore', file], { home, env });
        const copy = await serverOn(home, env);
        try {
          assert.deepEqual(await view(copy, secret), seen, env.QUERYAPIGATE_DATABASE_URL ? 'PostgreSQL' : 'SQLite');
        } finally {
          await copy.stop();
        }
      } finally {
        rmSync(home, { recursive: true, force: true });
      }
    }
    const bad = await cli(['restore', '/no/such/file.json'], { home: folder });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /no such file/);
  } finally {
    await s.stop();
    await from.drop();
    await into.drop();
    rmSync(folder, { recursive: true, force: true });
  }
});

test('migrate-to-postgres copies a SQLite store into a fresh PostgreSQL database: keys keep working, the same answers, event ids go on', async () => {
  const pg = await scratchDatabase('qag_migrate');
  const { s, secret, seen } = await original();
  try {
    const r = await cli(['migrate-to-postgres', pg.url, '--json'], { home: s.home });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`from: SQLite ${s.home}/queryapigate\\.db \\(opened directly\\)`));
    assert.match(r.stderr, /to: PostgreSQL postgres:\/\/postgres@127\.0\.0\.1:5432\/qag_migrate_/);
    const report = JSON.parse(r.stdout);
    const [{ last_value }] = await pg.sql`SELECT last_value FROM event_ids`;
    assert.equal(Number(last_value), report.last_event_id, 'the id sequence stands at the highest id copied');
    assert.ok(report.last_event_id >= CALLS.length);
    const [{ n }] = await pg.sql`SELECT count(*)::int AS n FROM api_keys`;
    assert.equal(n, report.rows.api_keys);

    const home = tempHome();
    copyFileSync(join(s.home, EXAMPLES_DB_FILE), join(home, EXAMPLES_DB_FILE));
    const onPg = await serverOn(home, { QUERYAPIGATE_DATABASE_URL: pg.url });
    try {
      assert.deepEqual(await view(onPg, secret), seen, 'same answers, queries, keys and history');
      await onPg.call('GET', '/api/v1/history'); // flushes the new runs
      const [{ top }] = await pg.sql`SELECT max(event_id)::int AS top FROM run_history`;
      assert.ok(top > report.last_event_id, 'new runs get ids after the copied ones');
    } finally {
      await onPg.stop();
      rmSync(home, { recursive: true, force: true });
    }

    const again = await cli(['migrate-to-postgres', pg.url], { home: s.home });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^error: the store is not empty/m);
    const wrongUrl = await cli(['migrate-to-postgres', 'mysql://x@y/z'], { home: s.home });
    assert.equal(wrongUrl.code, 2);
    const fromPg = await cli(['migrate-to-postgres', pg.url], { home: s.home, env: { QUERYAPIGATE_DATABASE_URL: pg.url } });
    assert.equal(fromPg.code, 1);
    assert.match(fromPg.stderr, /PostgreSQL already/);
  } finally {
    await s.stop();
    await pg.drop();
  }
});

test("a restored copy's event ids go on after its pages' last ids, whatever the catalog says", async () => {
  const dir = tempHome();
  const db = openSqlite(join(dir, 'store.db'));
  try {
    await migrate(db);
    const page = ['2026-12-05 10:00:00\tq\tk\tsuccess\t{}', '2026-12-05 10:00:01\tq\tk\tsuccess\t{}'].join('\n');
    const dump: StoreDump = {
      format: DUMP_FORMAT,
      dialect: 'sqlite',
      schema_version: SCHEMA_VERSION,
      made_at: '2026-12-05 10:00:02',
      last_event_id: 0,
      tables: {
        events_1: {
          columns: ['id', 'executed_at', 'query', 'key_name', 'status', 'payload', 'last_id', 'body'],
          rows: [[41, '2026-12-05 10:00:00', null, null, 'page', '{}', 42, page]],
        },
      },
    };
    const report = await restoreStore(db, dump, { force: false });
    assert.equal(report.last_event_id, 42);
    assert.equal(report.rows.events_1, 2, 'a page counts its events');
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
