// The event log (src/store/events.ts) on SQLite and PostgreSQL: unique increasing ids, resumable paged reads
// across segment boundaries, filters, retention by whole segments, and concurrent appenders on one PostgreSQL store.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { EventLog, payloadJson, type EventReadOptions } from '../../src/store/events.js';
import type { EventRow, RunRecord } from '../../src/contract/messages.js';
import { migrate } from '../../src/store/migrations.js';
import { copyField, openPostgres, openSqlite, type SqlDb } from '../../src/store/sql.js';
import { scratchDatabase } from '../helpers.js';

/** A clock the test moves by hand (epoch ms). */
class Clock {
  constructor(public ms = Date.UTC(2026, 10, 30, 12, 0, 0)) {}
  now = () => this.ms;
  advance(s: number) {
    this.ms += s * 1000;
  }
}

let seq = 0;
function run(over: Partial<RunRecord> = {}): RunRecord {
  const n = ++seq;
  const base: RunRecord = {
    query: `q${n % 3}`,
    version: 1 + (n % 2),
    kind: 'saved',
    executed_at: `2026-11-30 12:${String(Math.floor(n / 60) % 60).padStart(2, '0')}:${String(n % 60).padStart(2, '0')}`,
    status: n % 5 === 0 ? 'error' : 'success',
    connection_name: 'warehouse',
    key_name: `key-${n % 4}`,
    request_id: `req-${n}`,
    rows: n % 7,
    duration_ms: n % 13,
    serialization_ms: 0.5,
    transport: 'rest',
  };
  if (base.status === 'error') Object.assign(base, { error: 'boom "quoted"\nline 2 \\ backslash', code: 'query_failed', rows: null });
  return { ...base, ...over };
}
const runs = (n: number, over: Partial<RunRecord> = {}) => Array.from({ length: n }, () => run(over));

/** Reads everything after `from` in pages of `page`, as the live feed would resume. */
async function readAll(log: EventLog, from: number, page: number, filter: Omit<EventReadOptions, 'limit' | 'after'> = {}) {
  const out: EventRow[] = [];
  let afterId = from;
  for (;;) {
    const got = await log.read({ ...filter, after: afterId, limit: page });
    assert.ok(got.length <= page);
    if (!got.length) return out;
    out.push(...got);
    afterId = got[got.length - 1].id;
  }
}

/**
 * Writes again the page that starts at `events`' first id in the line releases before stop 57 wrote: executed_at,
 * query, key_name and status as COPY's text, then the rest as payloadJson; in body, as those releases did.
 */
async function asEarlierLines(db: SqlDb, events: EventRow[]): Promise<void> {
  const [seg] = await db.all<{ table_name: string }>('SELECT table_name FROM event_segments');
  const body = events.map((r) => [r.executed_at, r.query, r.key_name, r.status].map(copyField).join('\t') + `\t${payloadJson(r)}`).join('\n');
  const changed = await db.run(`UPDATE ${seg.table_name} SET body = ?, lines = NULL WHERE id = CAST(? AS BIGINT) AND last_id = CAST(? AS BIGINT)`, [
    body,
    events[0].id,
    events[events.length - 1].id,
  ]);
  assert.equal(changed, 1, 'one page held those events');
}

function assertIncreasing(ids: number[], what: string) {
  for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `${what}: id ${ids[i]} after ${ids[i - 1]} at ${i}`);
}

interface Engine {
  name: 'sqlite' | 'postgres';
  /** A fresh, empty store; `migrated` applies the store's own schema first (run_history and friends). */
  fresh(migrated?: boolean): Promise<SqlDb>;
  /** Another connection to the last store made by fresh(). */
  another(): SqlDb;
  tables(db: SqlDb): Promise<number>;
  cleanup(): Promise<void>;
}

function sqliteEngine(): Engine {
  const dirs: string[] = [];
  const open: SqlDb[] = [];
  let file = '';
  return {
    name: 'sqlite',
    async fresh(migrated = false) {
      const dir = mkdtempSync(join(tmpdir(), 'qag-events-'));
      dirs.push(dir);
      file = join(dir, 'store.db');
      const db = openSqlite(file);
      open.push(db);
      if (migrated) await migrate(db);
      return db;
    },
    another() {
      const db = openSqlite(file);
      open.push(db);
      return db;
    },
    async tables(db) {
      const [r] = await db.all<{ n: number }>("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name LIKE 'events\\_%' ESCAPE '\\'");
      return Number(r.n);
    },
    async cleanup() {
      for (const db of open) await db.close().catch(() => undefined);
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    },
  };
}

function postgresEngine(): Engine {
  const scratch: Array<Awaited<ReturnType<typeof scratchDatabase>>> = [];
  const open: SqlDb[] = [];
  return {
    name: 'postgres',
    async fresh(migrated = false) {
      const s = await scratchDatabase('qag_events');
      scratch.push(s);
      const db = openPostgres(s.url, { max: 3 });
      open.push(db);
      if (migrated) await migrate(db);
      return db;
    },
    another() {
      const db = openPostgres(scratch[scratch.length - 1].url, { max: 3 });
      open.push(db);
      return db;
    },
    async tables(db) {
      const [r] = await db.all<{ n: number }>("SELECT count(*) AS n FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'events\\_%'");
      return Number(r.n);
    },
    async cleanup() {
      for (const db of open) await db.close().catch(() => undefined);
      for (const s of scratch) await s.drop();
    },
  };
}

for (const make of [sqliteEngine, postgresEngine]) {
  const engine = make();
  describe(`event log on ${engine.name}`, () => {
    after(() => engine.cleanup());

    test('ids are unique and increasing across many batches, and continue above the history ids', async () => {
      const db = await engine.fresh(true);
      // Runs recorded before the event log existed: event ids must continue above them (contract §4.3, §7).
      for (let i = 0; i < 3; i++) {
        await db.run(
          'INSERT INTO run_history (query_name, version, slot, event_id, executed_at, status, key_name, entry_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
          ['q', 1, i, 40 + i, '2026-11-30 11:00:00', 'success', 'admin', '{}'],
        );
      }
      const [{ n: historyMax }] = await db.all<{ n: number }>('SELECT max(event_id) AS n FROM run_history');
      const clock = new Clock();
      const log = await EventLog.open(db, { retentionS: 3600, now: clock.now });
      assert.equal(await log.lastId(), Number(historyMax));
      const all: EventRow[] = [];
      // Sizes that cover the SQLite chunking (150 rows, power-of-two rest) and the PostgreSQL chunking (10,000 rows).
      for (const size of [1, 2, 149, 150, 151, 999, 1234, 5000, 10_001, 3]) {
        const batch = runs(size);
        const before = JSON.stringify(batch);
        const written = await log.append(batch);
        assert.equal(written.length, size);
        written.forEach((w, i) => {
          assert.deepEqual(w, { ...batch[i], id: w.id });
        });
        // The runs given are left as they were: the recorder writes the same objects to history afterwards.
        assert.equal(JSON.stringify(batch), before);
        all.push(...written);
        clock.advance(1);
      }
      const ids = all.map((r) => r.id);
      assertIncreasing(ids, 'append order');
      assert.ok(ids[0] > Number(historyMax), 'first event id above the history ids');
      assert.equal(await log.lastId(), ids[ids.length - 1]);
      // Opening again (as another process would) keeps counting from where it was.
      const again = await EventLog.open(db, { retentionS: 3600, now: clock.now });
      const [next] = await again.append(runs(1));
      assert.ok(next.id > ids[ids.length - 1]);
      // Everything reads back, in order, field for field.
      const read = await readAll(again, 0, 4000);
      assert.deepEqual(
        read.map((r) => r.id),
        [...ids, next.id],
      );
      assert.deepEqual(read.slice(0, all.length), all);
    });

    test('texts a joined column or a COPY line cannot carry as they are (newline, tab, backslash, \\N, a lone empty text) read back whole', async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      const odd = ['two\nlines', '\\N', '', 'plain', 'tab\there', 'back\\slash\\n', 'carriage\rreturn', '\\\t\\\n', 'ünïcödé €'];
      const written: EventRow[] = [];
      // Alone (a batch of one: a lone empty text is no element to string_to_array), and all together.
      for (const key of odd) written.push(...(await log.append([run({ key_name: key })])));
      written.push(...(await log.append(odd.map((key) => run({ key_name: key, query: key === 'plain' ? null : key })))));
      written.push(...(await log.append([run({ query: null, key_name: null, kind: 'adhoc', version: null })])));
      assert.deepEqual(await readAll(log, 0, 100), written);
      assert.deepEqual(
        written.slice(0, odd.length).map((r) => r.key_name),
        odd,
      );
    });

    test('a batch of long, non-ASCII payloads (many COPY pieces, one row longer than a piece) reads back whole', async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      const long = (i: number) => `€${'日本語'.repeat(i === 150 ? 30_000 : 50 + i)}\t${'x'.repeat(i * 7)}`;
      const written = await log.append(Array.from({ length: 300 }, (_, i) => run({ error: long(i), status: 'error', code: 'query_failed' })));
      const read = await readAll(log, 0, 1000);
      assert.deepEqual(read, written);
      assert.deepEqual(
        read.map((r) => r.error),
        Array.from({ length: 300 }, (_, i) => long(i)),
      );
    });

    test('an append is a row a page of at most 1,000 events, and reads that resume inside a page get exactly the rest', async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      const written = [...(await log.append(runs(4500))), ...(await log.append(runs(3)))];
      const [seg] = await db.all<{ table_name: string }>('SELECT table_name FROM event_segments');
      const rows = await db.all<{ id: number; last_id: number }>(`SELECT id, last_id FROM ${seg.table_name} ORDER BY id`);
      const first = written[0].id;
      assert.deepEqual(
        rows.map((r) => [Number(r.id) - first, Number(r.last_id) - first]),
        [...Array.from({ length: 4 }, (_, i) => [i * 1000, i * 1000 + 999]), [4000, 4499], [4500, 4502]],
      );
      for (const from of [first, first + 1, first + 998, first + 999, first + 1000, first + 4498, first + 4502]) {
        assert.deepEqual(
          await readAll(log, from, 333),
          written.filter((w) => w.id > from),
          `after ${from - first}`,
        );
      }
      const some = await log.read({ after: first + 10, limit: 5, key: 'key-1' });
      assert.deepEqual(some, written.filter((w) => w.id > first + 10 && w.key_name === 'key-1').slice(0, 5));
      // Filters whose texts a line escapes find their events in pages that hold them, and none elsewhere.
      const odd = await log.append(runs(3, { key_name: 'tab\there', query: 'back\\slash' }));
      await log.append(runs(2500));
      assert.deepEqual(await readAll(log, 0, 2, { key: 'tab\there' }), odd);
      assert.deepEqual(
        await readAll(log, 0, 2, { query: 'back\\slash', status: odd[2].status }),
        odd.filter((e) => e.status === odd[2].status),
      );
      assert.deepEqual(await log.read({ limit: 10, key: 'nobody' }), []);
      assert.deepEqual(
        await log.read({ limit: 10, key: 'key-1', query: 'back\\slash' }),
        odd.filter((e) => e.key_name === 'key-1'),
      );
    });

    test('a page is closed at about 128 KiB of text, before its 1,000 events', async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      const written = await log.append(Array.from({ length: 300 }, (_, i) => run({ error: 'e'.repeat(1000 + i), status: 'error' })));
      const [seg] = await db.all<{ table_name: string }>('SELECT table_name FROM event_segments');
      const rows = await db.all<{ id: number; last_id: number; text: string }>(`SELECT id, last_id, lines AS text FROM ${seg.table_name} ORDER BY id`);
      assert.ok(rows.length >= 2, `${rows.length} pages for 300 events of about 1.1 KB`);
      for (const r of rows) {
        const lines = r.text.split('\n');
        assert.equal(lines.length, Number(r.last_id) - Number(r.id) + 1);
        // Closed once it held 128 KiB: at most one line beyond it.
        assert.ok(r.text.length - lines[lines.length - 1].length - 1 < 128 << 10, `a page of ${r.text.length} characters`);
      }
      assert.deepEqual(await readAll(log, 0, 70), written);
    });

    test("every field of a page's line reads back as the earlier line's JSON gave it: nulls, odd texts, numbers, optional fields", async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      const odd = ['tab\there', 'back\\slash', '\\N', '', 'two\nlines', 'ünïcödé €'];
      const made: RunRecord[] = [
        ...odd.map((t, i) => run({ connection_name: t, request_id: odd[(i + 1) % odd.length], transport: odd[(i + 2) % odd.length] as 'rest' })),
        run({ version: null, rows: null, duration_ms: null, serialization_ms: null, connection_name: null as unknown as string }),
        run({ rows: 0, duration_ms: 0.1 + 0.2, serialization_ms: 1e-7, version: 2 ** 40 }),
        run({ duration_ms: Number.NaN, serialization_ms: Number.POSITIVE_INFINITY }),
        run({ query: null, version: null, kind: 'adhoc', sql: 'SELECT 1\tAS "x"', sql_truncated: true, params: ['b', 'a'] }),
        run({ masked: [{ column: 'email', action: 'redact' }], status: 'error', error: 'e\tf', code: 'query_failed' }),
        // A query filter's text in another field: the page is read, and the line does not pass.
        run({ query: 'q-filter', connection_name: 'q-other' }),
        run({ query: 'q-other' }),
      ];
      const written = await log.append(made);
      const read = await readAll(log, 0, 100);
      // JSON's null for NaN and the infinities, as before.
      assert.deepEqual(read, JSON.parse(JSON.stringify(written)));
      assert.deepEqual(
        (await readAll(log, 0, 5, { query: 'q-other' })).map((r) => r.id),
        written.filter((r) => r.query === 'q-other').map((r) => r.id),
      );
      // The same events written as lines of the earlier kind read back as the same JSON, key for key.
      await asEarlierLines(db, written);
      assert.deepEqual(
        (await readAll(log, 0, 100)).map((r) => JSON.stringify(r)),
        read.map((r) => JSON.stringify(r)),
      );
    });

    test('runs that share most fields and runs that differ in one of them, in any order, each read back as its own', async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      // A line's shared fields are made again only when a run differs in one: every field changes alone, then back.
      const changes: Partial<RunRecord>[] = [
        { executed_at: '2026-12-06 04:00:01' },
        { query: 'q-two' },
        { key_name: 'k-two' },
        { status: 'error' },
        { version: 2 },
        { version: null },
        { kind: 'adhoc' },
        { connection_name: 'c\ttwo' },
        { transport: 'mcp' },
        { code: 'query_failed', error: 'e' },
        { masked: [{ column: 'email', action: 'redact' }] },
      ];
      const base: RunRecord = { ...run(), status: 'success' };
      delete base.error;
      delete base.code;
      const made: RunRecord[] = [];
      for (const c of changes) made.push(base, { ...base }, { ...base, ...c }, { ...base, ...c }, base);
      const shuffled = made.map((_, i) => made[(i * 7) % made.length]);
      const written = [...(await log.append(made)), ...(await log.append(shuffled)), ...(await log.append([base, base]))];
      assert.deepEqual(await readAll(log, 0, 1000), JSON.parse(JSON.stringify(written)));
    });
    test("a run with the line before's fields but for its own four is a short line; every event reads back whole, from inside a page and through filters", async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      const base: RunRecord = { ...run(), status: 'success', masked: [{ column: 'email', action: 'hash' }] };
      delete base.error;
      delete base.code;
      const own = (i: number): RunRecord => ({ ...base, request_id: `r\t${i}`, rows: i % 4 === 0 ? null : i, duration_ms: i / 3, serialization_ms: 0.1 * i });
      // The lookup's shape (one query, key and second), broken by runs of another key, an error and another second.
      const made: RunRecord[] = [];
      for (let i = 0; i < 1200; i++) {
        if (i % 97 === 50) made.push({ ...own(i), key_name: 'other' });
        else if (i % 211 === 100) made.push({ ...own(i), status: 'error', error: 'boom', code: 'query_failed' });
        else if (i === 700) made.push({ ...own(i), executed_at: '2026-12-06 04:00:02' });
        else made.push(own(i));
      }
      const written = await log.append(made);
      const [seg] = await db.all<{ table_name: string }>('SELECT table_name FROM event_segments');
      const pages = await db.all<{ id: number; lines: string; body: string | null; status: string; payload: string }>(
        `SELECT id, lines, body, status, payload FROM ${seg.table_name} ORDER BY id`,
      );
      assert.equal(pages.length, 2);
      for (const p of pages) {
        // What a release before this one reads as a row of one event, not a failed read.
        assert.deepEqual([p.body, p.status, p.payload], [null, 'page', '{}']);
        const widths = p.lines.split('\n').map((l) => l.split('\t').length);
        assert.equal(widths[0], 13, 'a page starts with a whole line');
        const first = Number(p.id) - written[0].id;
        widths.forEach((w, i) => {
          const r = made[first + i];
          const prev = made[first + i - 1];
          const same = i > 0 && r.key_name === prev.key_name && r.status === prev.status && r.executed_at === prev.executed_at && !r.error && !prev.error;
          assert.equal(w, same ? 4 : 13, `line ${first + i}`);
        });
      }
      const all = JSON.parse(JSON.stringify(written));
      assert.deepEqual(await readAll(log, 0, 1000), all);
      for (const from of [written[0].id + 1, written[0].id + 498, written[0].id + 703])
        assert.deepEqual(
          await readAll(log, from, 77),
          all.filter((w: EventRow) => w.id > from),
          `after ${from}`,
        );
      assert.deepEqual(
        await readAll(log, 0, 50, { key: base.key_name ?? undefined }),
        all.filter((w: EventRow) => w.key_name === base.key_name),
      );
      assert.deepEqual(
        await readAll(log, 0, 5, { key: 'other' }),
        all.filter((w: EventRow) => w.key_name === 'other'),
      );
      assert.deepEqual(
        await readAll(log, 0, 5, { status: 'error' }),
        all.filter((w: EventRow) => w.status === 'error'),
      );
    });
    test('governed runs: those holding one mask list share its JSON; another list, an equal copy, or a failure beside it read back as their own', async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      const base: RunRecord = { ...run(), status: 'success' };
      delete base.error;
      delete base.code;
      const hashed = [{ column: 'abalance', action: 'hash' }];
      const dropped = [{ column: 'abalance', action: 'drop' }];
      const made: RunRecord[] = [
        { ...base, masked: hashed },
        { ...base, masked: hashed, request_id: 'r2' },
        { ...base, masked: dropped },
        { ...base, masked: [...hashed] },
        { ...base, masked: hashed, status: 'error', error: 'boom', code: 'query_failed' },
        { ...base, masked: hashed },
        base,
        { ...base, masked: dropped },
      ];
      const written = [...(await log.append(made)), ...(await log.append([...made].reverse()))];
      const read = await readAll(log, 0, 1000);
      assert.deepEqual(read, JSON.parse(JSON.stringify(written)));
      assert.deepEqual(
        read.map((e) => (e as RunRecord).masked?.[0]?.action ?? null),
        ['hash', 'hash', 'drop', 'hash', 'hash', 'hash', null, 'drop', 'drop', null, 'hash', 'hash', 'hash', 'drop', 'hash', 'hash'],
      );
    });
    test('lines written as releases before stop 57 wrote them (the rest as JSON) read back beside lines of this release', async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      const written = [...(await log.append(runs(30))), ...(await log.append(runs(7)))];
      const first = written[0].id;
      const [seg] = await db.all<{ table_name: string }>('SELECT table_name FROM event_segments');
      const [page] = await db.all<{ lines: string }>(`SELECT lines FROM ${seg.table_name} ORDER BY id LIMIT 1`);
      for (const line of page.lines.split('\n')) {
        const f = line.split('\t');
        assert.equal(f.length, 13, "this release's line: a run's fields by position");
        // What a release before reads as the rest: JSON, so its reads do not fail during a rolling upgrade.
        assert.equal(typeof JSON.parse(f[4]), 'object');
      }
      await asEarlierLines(db, written.slice(0, 30));
      for (const from of [0, first + 3, first + 29])
        assert.deepEqual(
          await readAll(log, from, 9),
          written.filter((w) => w.id > from),
          `after ${from}`,
        );
      assert.deepEqual(
        await readAll(log, 0, 4, { key: 'key-1' }),
        written.filter((w) => w.key_name === 'key-1'),
      );
      assert.deepEqual(
        await readAll(log, 0, 4, { status: 'error' }),
        written.filter((w) => w.status === 'error'),
      );
    });

    test('pages of 2,000 events (as the release before wrote them) read exactly from inside', async () => {
      const db = await engine.fresh(true);
      const log = await EventLog.open(db, { retentionS: 3600 });
      const written = [...(await log.append(runs(2000))), ...(await log.append(runs(10)))];
      const [seg] = await db.all<{ table_name: string }>('SELECT table_name FROM event_segments');
      const table = seg.table_name;
      const first = written[0].id;
      // The first append's two pages joined into one row, as one page of 2,000.
      const pages = await db.all<{ id: number; executed_at: string; body: string }>(
        `SELECT id, executed_at, lines AS body FROM ${table} WHERE id < CAST(? AS BIGINT) ORDER BY id`,
        [first + 2000],
      );
      assert.equal(pages.length, 2);
      await db.run(`DELETE FROM ${table} WHERE id < CAST(? AS BIGINT)`, [first + 2000]);
      await db.run(`INSERT INTO ${table} (id, executed_at, status, payload, last_id, body) VALUES (?, ?, 'page', '{}', ?, ?)`, [
        first,
        pages[0].executed_at,
        first + 1999,
        pages.map((p) => p.body).join('\n'),
      ]);
      for (const from of [first - 1, first + 499, first + 1500, first + 1998, first + 1999]) {
        assert.deepEqual(
          await readAll(log, from, 333),
          written.filter((w) => w.id > from),
          `after ${from - first}`,
        );
      }
    });

    test('rows of one event each (the layout before pages) read with the pages after them; their table gets the page columns', async () => {
      const db = await engine.fresh(true);
      const clock = new Clock();
      const old = await (await EventLog.open(db, { retentionS: 3600, now: clock.now })).append(runs(6));
      const [seg] = await db.all<{ table_name: string }>('SELECT table_name FROM event_segments');
      // The same segment's table as the earlier release made it, holding those events a row each.
      await db.run(`DROP TABLE ${seg.table_name}`);
      await db.run(
        `CREATE TABLE ${seg.table_name} (id BIGINT PRIMARY KEY, executed_at TEXT NOT NULL, query TEXT, key_name TEXT, status TEXT NOT NULL, payload TEXT NOT NULL)`,
      );
      for (const e of old) {
        const { id, executed_at, query, key_name, status, ...rest } = e;
        await db.run(`INSERT INTO ${seg.table_name} (id, executed_at, query, key_name, status, payload) VALUES (?, ?, ?, ?, ?, ?)`, [
          id,
          executed_at,
          query,
          key_name,
          status,
          JSON.stringify(rest),
        ]);
      }
      // A process of this release: its first append to that segment adds the columns, then writes a page.
      const log = await EventLog.open(db, { retentionS: 3600, now: clock.now });
      const added = await log.append(runs(9));
      const all = [...old, ...added];
      assert.deepEqual(await readAll(log, 0, 4), all);
      assert.deepEqual(await readAll(log, old[3].id, 2), all.slice(4));
      for (const filter of [{ key: 'key-2' }, { status: 'error' as const }, { query: 'q1', since: old[2].executed_at }]) {
        const want = all.filter(
          (e) =>
            (filter.key === undefined || e.key_name === filter.key) &&
            (filter.status === undefined || e.status === filter.status) &&
            (filter.query === undefined || e.query === filter.query) &&
            (filter.since === undefined || e.executed_at >= filter.since),
        );
        assert.ok(want.length > 0 && want.length < all.length);
        assert.deepEqual(await readAll(log, 0, 3, filter), want, JSON.stringify(filter));
      }
      if (engine.name === 'postgres') {
        const [{ lz4 }] = await db.all<{ lz4: boolean }>(
          "SELECT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)) AS lz4",
        );
        const [lines] = await db.all<{ s: string }>(
          `SELECT attstorage AS s FROM pg_attribute WHERE attrelid = '${seg.table_name}'::regclass AND attname = 'lines'`,
        );
        if (!lz4) assert.equal(lines.s, 'e', 'a page is kept uncompressed where the server has no lz4');
        else {
          await log.append(runs(500)); // a page long enough to be stored compressed
          assert.equal(lines.s, 'x');
          const pages = await db.all<{ c: string | null }>(`SELECT pg_column_compression(lines) AS c FROM ${seg.table_name} WHERE lines IS NOT NULL`);
          assert.ok(pages.length > 0);
          // Pages short enough to stay in the row are not compressed; the rest are, with lz4.
          for (const p of pages) assert.ok(p.c === null || p.c === 'lz4', `compressed with ${p.c}`);
          assert.ok(
            pages.some((p) => p.c === 'lz4'),
            'a long page is compressed with lz4',
          );
        }
      }
    });

    test('reads after an id return exactly the later events once, across segment boundaries', async () => {
      const db = await engine.fresh();
      const clock = new Clock();
      const log = await EventLog.open(db, { retentionS: 3600, segmentS: 10, now: clock.now });
      const all: EventRow[] = [];
      for (let i = 0; i < 40; i++) {
        all.push(...(await log.append(runs(1 + ((i * 7) % 23)))));
        clock.advance(i % 3 === 0 ? 4 : 1.5); // lands on, before and after segment boundaries
      }
      assert.ok((await engine.tables(db)) >= 8, 'several segments were made');
      const ids = all.map((r) => r.id);
      assertIncreasing(ids, 'append order');
      for (const page of [1, 5, 17, 100, 10_000]) {
        assert.deepEqual(
          (await readAll(log, 0, page)).map((r) => r.id),
          ids,
          `page ${page}`,
        );
      }
      // Resuming after any id, including one at each segment's edge, gives exactly the rest.
      const segments = await db.all<{ first_id: number; last_id: number }>('SELECT first_id, last_id FROM event_segments ORDER BY segment');
      const starts = [0, ...segments.flatMap((s) => [Number(s.first_id), Number(s.last_id), Number(s.first_id) - 1]), ids[ids.length - 1], ids[13], ids[200]];
      for (const start of starts) {
        const rest = await readAll(log, start, 11);
        assert.deepEqual(
          rest.map((r) => r.id),
          ids.filter((id) => id > start),
          `after ${start}`,
        );
      }
      assert.deepEqual(await log.read({ after: ids[ids.length - 1], limit: 10 }), []);
    });

    test('filters: query, key, status and time, with paging', async () => {
      const db = await engine.fresh();
      const clock = new Clock();
      const log = await EventLog.open(db, { retentionS: 3600, segmentS: 5, now: clock.now });
      const all: EventRow[] = [];
      for (let i = 0; i < 12; i++) {
        all.push(...(await log.append(runs(25))));
        all.push(...(await log.append([run({ query: null, kind: 'adhoc', key_name: null })])));
        clock.advance(2);
      }
      const check = async (filter: Omit<EventReadOptions, 'limit' | 'after'>, keep: (r: EventRow) => boolean) => {
        const want = all.filter(keep);
        assert.ok(want.length > 0 && want.length < all.length, `filter ${JSON.stringify(filter)} selects some`);
        assert.deepEqual(await readAll(log, 0, 7, filter), want, JSON.stringify(filter));
        const mid = all[Math.floor(all.length / 2)].id;
        assert.deepEqual(
          await readAll(log, mid, 3, filter),
          want.filter((r) => r.id > mid),
          `${JSON.stringify(filter)} after ${mid}`,
        );
      };
      await check({ query: 'q1' }, (r) => r.query === 'q1');
      await check({ key: 'key-2' }, (r) => r.key_name === 'key-2');
      await check({ status: 'error' }, (r) => r.status === 'error');
      await check({ status: 'success', query: 'q0', key: 'key-3' }, (r) => r.status === 'success' && r.query === 'q0' && r.key_name === 'key-3');
      const times = [...new Set(all.map((r) => r.executed_at))].sort();
      const since = times[Math.floor(times.length / 3)];
      const until = times[Math.floor((2 * times.length) / 3)];
      await check({ since }, (r) => r.executed_at >= since);
      await check({ until }, (r) => r.executed_at < until);
      await check({ since, until, status: 'success' }, (r) => r.executed_at >= since && r.executed_at < until && r.status === 'success');
      assert.deepEqual(await log.read({ limit: 10, key: 'nobody' }), []);
      // Ad-hoc runs (no query, no key) keep their nulls.
      const adhoc = all.filter((r) => r.query === null);
      const got = (await readAll(log, 0, 50)).filter((r) => r.kind === 'adhoc');
      assert.deepEqual(got, adhoc);
    });

    test('expire drops whole segments only once their newest event is older than the retention', async () => {
      const db = await engine.fresh();
      const clock = new Clock();
      const retentionS = 30;
      const log = await EventLog.open(db, { retentionS, segmentS: 10, now: clock.now });
      const written: Array<{ at: number; rows: EventRow[] }> = [];
      for (let i = 0; i < 12; i++) {
        written.push({ at: clock.ms, rows: await log.append(runs(20)) });
        clock.advance(5);
      }
      const tablesBefore = await engine.tables(db);
      assert.ok(tablesBefore >= 6);
      const segments = await db.all<{ segment: number; closed_ms: number; last_id: number }>(
        'SELECT segment, closed_ms, last_id FROM event_segments ORDER BY segment',
      );
      const oldest = segments[0];
      // At the boundary (the oldest segment's newest event exactly retentionS old) nothing goes.
      clock.ms = Number(oldest.closed_ms) + retentionS * 1000;
      assert.equal(await log.expire(), 0);
      assert.equal(await engine.tables(db), tablesBefore);
      // One millisecond later that segment goes, as a whole table, and nothing else.
      clock.ms += 1;
      assert.equal(await log.expire(), 1);
      assert.equal(await engine.tables(db), tablesBefore - 1);
      const kept = await readAll(log, 0, 1000);
      assert.equal(kept[0].id, Number(oldest.last_id) + 1, 'the rest start right after the dropped segment');
      // Every event written within the retention window is still there, whatever the clock does next.
      for (const step of [7, 3, 11, 0.001, 9]) {
        clock.advance(step);
        await log.expire();
        const ids = new Set((await readAll(log, 0, 1000)).map((r) => r.id));
        for (const w of written) {
          if (clock.ms - w.at <= retentionS * 1000)
            for (const r of w.rows) assert.ok(ids.has(r.id), `event ${r.id} written ${(clock.ms - w.at) / 1000}s ago is kept`);
        }
      }
      // Long after: every segment gone, tables too, and ids keep counting up.
      const last = await log.lastId();
      clock.advance(retentionS + 100);
      assert.ok((await log.expire()) >= 1);
      assert.equal(await engine.tables(db), 0);
      assert.deepEqual(await log.read({ limit: 10 }), []);
      assert.equal(await log.lastId(), last, 'the newest id survives its segment');
      const [fresh] = await log.append(runs(1));
      assert.ok(fresh.id > last);
      assert.equal(await engine.tables(db), 1);
    });

    test('a second instance on the same store continues the ids and reads the same events', async () => {
      const db = await engine.fresh();
      const clock = new Clock();
      const a = await EventLog.open(db, { retentionS: 3600, segmentS: 10, now: clock.now });
      const b = await EventLog.open(engine.another(), { retentionS: 3600, segmentS: 10, now: clock.now });
      const ids: number[] = [];
      for (let i = 0; i < 10; i++) {
        ids.push(...(await (i % 2 ? a : b).append(runs(13))).map((r) => r.id));
        clock.advance(3);
      }
      assertIncreasing(ids, 'alternating instances, one after another');
      assert.deepEqual(
        (await readAll(a, 0, 9)).map((r) => r.id),
        ids,
      );
      assert.deepEqual(
        (await readAll(b, 0, 9)).map((r) => r.id),
        ids,
      );
      assert.equal(await a.lastId(), ids[ids.length - 1]);
    });

    test('instances whose clocks disagree: reads still give every event once, in id order', async () => {
      const db = await engine.fresh();
      const behind = new Clock();
      const ahead = new Clock(behind.ms + 25_000);
      const a = await EventLog.open(db, { retentionS: 3600, segmentS: 10, now: behind.now });
      const b = await EventLog.open(engine.another(), { retentionS: 3600, segmentS: 10, now: ahead.now });
      const ids: number[] = [];
      for (let i = 0; i < 12; i++) {
        ids.push(...(await (i % 2 ? a : b).append(runs(5 + i))).map((r) => r.id));
        behind.advance(1);
        ahead.advance(1);
      }
      assertIncreasing(ids, 'one after another');
      const segments = await db.all<{ first_id: number; last_id: number }>('SELECT first_id, last_id FROM event_segments ORDER BY first_id');
      if (engine.name === 'sqlite') {
        // Store-wide the segment never goes back: segments never overlap in ids.
        for (let i = 1; i < segments.length; i++) assert.ok(Number(segments[i].first_id) > Number(segments[i - 1].last_id));
      } else {
        // Each instance writes its own clock's segment: their id ranges interleave.
        assert.ok(
          segments.some((s, i) => i > 0 && Number(s.first_id) < Number(segments[i - 1].last_id)),
          'segments overlap',
        );
      }
      for (const page of [1, 4, 50, 1000])
        assert.deepEqual(
          (await readAll(a, 0, page)).map((r) => r.id),
          ids,
          `page ${page}`,
        );
      for (const start of [ids[3], ids[30], ids[60]]) {
        assert.deepEqual(
          (await readAll(b, start, 6)).map((r) => r.id),
          ids.filter((id) => id > start),
          `after ${start}`,
        );
      }
    });
  });
}

/**
 * A fresh log with `n` events appended, then what an instance of a release before the append lock leaves: a row of one
 * event `ahead` ids past them (taken by nextval alone), which the sequence has not reached yet when the next range is
 * reserved.
 */
async function withIdTakenAhead(engine: Engine, n: number, ahead: number) {
  const db = await engine.fresh();
  const log = await EventLog.open(db, { retentionS: 3600 });
  const first = await log.append(runs(n));
  const [seg] = await db.all<{ table_name: string }>('SELECT table_name FROM event_segments');
  const taken = first[n - 1].id + ahead;
  await db.run(`INSERT INTO ${seg.table_name} (id, executed_at, query, key_name, status, payload) VALUES (?, 'x', 'old', NULL, 'success', '{}')`, [taken]);
  return { db, log, first, table: seg.table_name, taken };
}

describe('event log on postgres: concurrent appenders', () => {
  const engine = postgresEngine();
  after(() => engine.cleanup());

  test('two instances appending at once get unique ids, each increasing, and every event reads back once', async () => {
    const db = await engine.fresh();
    const clock = new Clock();
    const logs = [
      await EventLog.open(db, { retentionS: 3600, segmentS: 1, now: clock.now }),
      await EventLog.open(engine.another(), { retentionS: 3600, segmentS: 1, now: clock.now }),
    ];
    const mine: number[][] = [[], []];
    await Promise.all(
      logs.map(async (log, which) => {
        for (let i = 0; i < 30; i++) {
          // Not awaited one by one: each instance also has appends queued behind each other.
          const batches = await Promise.all([log.append(runs(40 + i)), log.append(runs(7))]);
          for (const b of batches) mine[which].push(...b.map((r) => r.id));
          clock.advance(0.35); // both instances cross segment boundaries while the other writes
        }
      }),
    );
    for (const [which, ids] of mine.entries()) assertIncreasing(ids, `instance ${which}`);
    const every = [...mine[0], ...mine[1]];
    assert.equal(new Set(every).size, every.length, 'no id handed out twice');
    const read = (await readAll(logs[0], 0, 97)).map((r) => r.id);
    assert.deepEqual(
      read,
      [...every].sort((x, y) => x - y),
    );
    assert.equal(await logs[1].lastId(), Math.max(...every));
  });

  test('ids an earlier release took inside the range an append reserved (nextval a row, no lock): the append takes the next range', async () => {
    const { log, first, taken } = await withIdTakenAhead(engine, 5, 3);
    const next = await log.append(runs(10));
    assert.ok(next[0].id > taken, `the new range starts after the id taken (${next[0].id} > ${taken})`);
    assertIncreasing(
      next.map((r) => r.id),
      'the retried append',
    );
    const read = (await readAll(log, 0, 100)).map((r) => r.id);
    assert.deepEqual(read, [...first.map((r) => r.id), taken, ...next.map((r) => r.id)]);
  });

  test('an append of several pages whose range holds a taken id in its last page writes none of them, and takes the next range', async () => {
    // Three pages of the next 2,200 ids (1,000, 1,000, 200): an id taken in the third.
    const { db, log, first, table, taken } = await withIdTakenAhead(engine, 2, 2100);
    const next = await log.append(runs(2200));
    assert.ok(next[0].id > taken, `the new range starts after the id taken (${next[0].id} > ${taken})`);
    const [pages] = await db.all<{ n: number }>(`SELECT count(*) AS n FROM ${table} WHERE lines IS NOT NULL`);
    assert.equal(Number(pages.n), 4, "the first append's page and the three of the retried one, none of the refused range");
    const read = (await readAll(log, 0, 500)).map((r) => r.id);
    assert.deepEqual(read, [...first.map((r) => r.id), taken, ...next.map((r) => r.id)]);
  });

  test('a segment whose table another instance dropped is made again', async () => {
    const db = await engine.fresh();
    const clock = new Clock();
    const a = await EventLog.open(db, { retentionS: 30, segmentS: 10, now: clock.now });
    const b = await EventLog.open(engine.another(), { retentionS: 30, segmentS: 10, now: clock.now });
    const first = await a.append(runs(3));
    // b's clock is far ahead: it expires the segment a still thinks it writes to.
    clock.advance(31);
    assert.equal(await b.expire(), 1);
    clock.advance(-31);
    const again = await a.append(runs(2));
    assert.ok(again[0].id > first[2].id);
    assert.deepEqual(
      (await readAll(b, 0, 10)).map((r) => r.id),
      again.map((r) => r.id),
    );
  });
});

test("a SQLite store's connection caches 2 MB of pages (SQLite's default), not better-sqlite3's 16 MB", async () => {
  // The recorder's appends fill whatever the cache allows, and the process keeps it (RSS after load).
  const dir = mkdtempSync(join(tmpdir(), 'qag-cache-'));
  const db = openSqlite(join(dir, 'store.db'));
  try {
    const [row] = await db.all<{ cache_size: number }>('PRAGMA cache_size');
    assert.equal(row.cache_size, -2000);
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
