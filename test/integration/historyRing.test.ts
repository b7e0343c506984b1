// Per-version history as a ring of QUERYAPIGATE_HISTORY_LIMIT slots (Store.writeRuns), on SQLite and PostgreSQL:
// the newest runs are kept, only kept runs are written, nothing is deleted, the table does not grow on
// PostgreSQL, a changed limit re-slots the rings, and a version-3 store's history carries over.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { EventRow } from '../../src/contract/messages.js';
import { migrate } from '../../src/store/migrations.js';
import { openPostgres, openSqlite, type SqlDb } from '../../src/store/sql.js';
import { HistoryBatch, Store } from '../../src/store/store.js';
import { scratchDatabase, startTestServer } from '../helpers.js';

const NOW = '2026-12-01 00:00:00';

/** Wraps a store connection and keeps every statement it is sent. */
function spied(db: SqlDb, seen: Array<{ text: string; params: unknown[] }>): SqlDb {
  const self: SqlDb = {
    dialect: db.dialect,
    all: (text, params = []) => {
      seen.push({ text, params });
      return db.all(text, params);
    },
    run: (text, params = []) => {
      seen.push({ text, params });
      return db.run(text, params);
    },
    tx: (fn) => db.tx((t) => fn(spied(t, seen))),
    copyIn: (statement, data) => {
      seen.push({ text: statement, params: [] });
      return db.copyIn(statement, data);
    },
    close: () => db.close(),
  };
  return self;
}

let nextId = 1000;
/** `n` runs of query@version with increasing event ids; request_id says which call each one was. */
function runs(query: string, version: number, n: number): EventRow[] {
  return Array.from({ length: n }, () => {
    const id = nextId++;
    return {
      id,
      query,
      version,
      kind: 'saved',
      executed_at: NOW,
      status: id % 5 ? 'success' : 'error',
      connection_name: 'main',
      key_name: `key-${id % 2}`,
      request_id: `r${id}`,
      rows: 1,
      duration_ms: 0.1,
      serialization_ms: 0,
      transport: 'rest',
    };
  });
}

async function addQuery(store: Store, name: string, versions = 1) {
  const fields = (uuid: string) => ({
    sql: 'SELECT 1',
    connection_name: 'main',
    parameters: {},
    description: '',
    author: null,
    tags: [],
    cache_ttl: null,
    uuid,
  });
  assert.equal(await store.createQuery({ name, collection: null, example: false }, fields(`${name}-1`), true, NOW), true);
  for (let v = 2; v <= versions; v++) assert.equal(await store.addVersion(name, fields(`${name}-${v}`), true, NOW), v);
}

/** The request ids history holds for query@version, newest first. */
async function kept(store: Store, query: string, version: number): Promise<string[]> {
  return (await store.listHistory({ query, version, limit: 10_000 })).map((e) => e.request_id);
}
const newest = (all: EventRow[], keep: number) =>
  all
    .slice(-keep)
    .reverse()
    .map((r) => r.request_id);

interface Engine {
  name: string;
  open(): Promise<SqlDb>;
  cleanup(): Promise<void>;
}

const engines: Engine[] = [
  (() => {
    const dirs: string[] = [];
    const open: SqlDb[] = [];
    return {
      name: 'sqlite',
      async open() {
        const dir = mkdtempSync(join(tmpdir(), 'qag-ring-'));
        dirs.push(dir);
        const db = openSqlite(join(dir, 'store.db'));
        open.push(db);
        return db;
      },
      async cleanup() {
        for (const db of open) await db.close();
        for (const d of dirs) rmSync(d, { recursive: true, force: true });
      },
    };
  })(),
  (() => {
    const scratch: Array<Awaited<ReturnType<typeof scratchDatabase>>> = [];
    const open: SqlDb[] = [];
    return {
      name: 'postgres',
      async open() {
        const s = await scratchDatabase('qag_ring');
        scratch.push(s);
        const db = openPostgres(s.url, { max: 2 });
        open.push(db);
        return db;
      },
      async cleanup() {
        for (const db of open) await db.close();
        for (const s of scratch) await s.drop();
      },
    };
  })(),
];

/** A fresh migrated store on `engine` with rings of `keep` slots. */
async function ringStore(engine: Engine, keep: number): Promise<{ db: SqlDb; store: Store }> {
  const db = await engine.open();
  await migrate(db);
  const store = new Store(db);
  await store.resizeRings(keep);
  return { db, store };
}

for (const engine of engines) {
  describe(`history ring on ${engine.name}`, () => {
    after(() => engine.cleanup());

    test('keeps the newest runs per version, writes only those, and never deletes', async () => {
      const db = await engine.open();
      await migrate(db);
      const seen: Array<{ text: string; params: unknown[] }> = [];
      const store = new Store(spied(db, seen));
      const keep = 5;
      await store.resizeRings(keep);
      await addQuery(store, 'alpha', 2);
      await addQuery(store, 'beta');
      const all = new Map<string, EventRow[]>([
        ['alpha@1', []],
        ['alpha@2', []],
        ['beta@1', []],
      ]);
      // Batches smaller than, equal to and larger than the ring, versions interleaved within a batch.
      for (const sizes of [
        [1, 0, 2],
        [3, 4, 5],
        [12, 1, 0],
        [0, 7, 2],
        [5, 5, 5],
        [2, 0, 11],
      ]) {
        const targets = [
          ['alpha', 1],
          ['alpha', 2],
          ['beta', 1],
        ] as const;
        const left = [...sizes];
        const batch: EventRow[] = [];
        while (left.some((n) => n > 0)) {
          for (let i = 0; i < 3; i++) if (left[i]-- > 0) batch.push(...runs(targets[i][0], targets[i][1], 1));
        }
        all.get('alpha@1')!.push(...batch.filter((r) => r.query === 'alpha' && r.version === 1));
        all.get('alpha@2')!.push(...batch.filter((r) => r.query === 'alpha' && r.version === 2));
        all.get('beta@1')!.push(...batch.filter((r) => r.query === 'beta'));
        seen.length = 0;
        const written = await store.writeRuns(batch, keep);
        assert.equal(
          written,
          sizes.reduce((s, n) => s + Math.min(n, keep), 0),
          `rows written for batch ${sizes}`,
        );
        // (The staging table's ON COMMIT DELETE ROWS empties this session's private copy, not a ring.)
        assert.ok(!seen.some((s) => /\bDELETE\s+FROM\b/i.test(s.text)), 'no DELETE on the write path');
        for (const [slot, list] of all) {
          const [q, v] = slot.split('@');
          assert.deepEqual(await kept(store, q, Number(v)), newest(list, keep), `${slot} after batch ${sizes}`);
        }
      }
      // Global reads stay newest first across versions, paged by the event-id cursor.
      const every = [...all.values()].flatMap((l) => l.slice(-keep)).sort((a, b) => b.id - a.id);
      const page1 = await store.listHistory({ limit: 4 });
      assert.deepEqual(
        page1.map((e) => e.id),
        every.slice(0, 4).map((r) => r.id),
      );
      const page2 = await store.listHistory({ limit: 4, before: page1[3].id });
      assert.deepEqual(
        page2.map((e) => e.id),
        every.slice(4, 8).map((r) => r.id),
      );
      assert.deepEqual(
        (await store.listHistory({ query: 'beta', status: 'error', limit: 100 })).map((e) => e.request_id),
        newest(all.get('beta@1')!, keep).filter((id) => Number(id.slice(1)) % 5 === 0),
      );
      assert.deepEqual(
        await store.runCounts('alpha'),
        new Map([
          [1, keep],
          [2, keep],
        ]),
      );
    });

    test('an entry reads back whole, whatever its texts, and so does one written whole before', async () => {
      const { db, store } = await ringStore(engine, 50);
      await addQuery(store, 'odd');
      const odd = ['two\nlines', '\\N', '', null, 'plain'];
      const written: EventRow[] = [];
      const one = (key: string | null, adhoc = false): EventRow => {
        const [r] = runs('odd', 1, 1);
        r.key_name = key;
        r.request_id = `${r.request_id}\t${key}\\\r`; // the entry's JSON then holds backslashes (COPY escapes them)
        if (adhoc) Object.assign(r, { query: null, version: null, kind: 'adhoc', sql: 'SELECT 1', params: [] });
        return r;
      };
      // Each alone (a lone empty text was no element to string_to_array), then together, then ad-hoc alone and together.
      for (const key of odd) {
        const batch = [one(key)];
        await store.writeRuns(batch, 50);
        written.push(...batch);
      }
      for (const batch of [odd.map((k) => one(k)), [one('x', true)], odd.map((k) => one(k, true))]) {
        await store.writeRuns(batch, 50);
        written.push(...batch);
      }
      // Entries written whole (every field, as before the payload became the entry) read the same.
      const [whole] = runs('odd', 1, 1);
      await db.run('INSERT INTO run_history (query_name, version, slot, event_id, executed_at, status, key_name, entry_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)', [
        'odd',
        1,
        49,
        whole.id,
        whole.executed_at,
        whole.status,
        whole.key_name,
        JSON.stringify({ ...whole, id: undefined }),
      ]);
      written.push(whole);
      const read = await store.listHistory({ limit: 100 });
      assert.deepEqual(read, [...written].reverse());
    });

    test('a HistoryBatch holds about what the rings keep, however many runs it counts', async () => {
      const { db, store } = await ringStore(engine, 5);
      await addQuery(store, 'busy');
      const batch = new HistoryBatch(5, 3);
      const made = runs('busy', 1, 1000);
      const adhoc = runs('busy', 1, 40).map((r) => Object.assign(r, { query: null, version: null, kind: 'adhoc', sql: 'SELECT 1', params: [] }));
      for (const r of [...made, ...adhoc]) {
        batch.add(r, r.id);
        assert.ok(batch.versions.get('busy\u00001')!.ids.length < 10, 'at most twice the ring held');
        assert.ok(batch.adhoc.ids.length < 6, 'at most twice the ad-hoc limit held');
      }
      assert.equal(batch.size, 1040);
      assert.equal(await store.writeHistory(batch), 5 + 3);
      const [counter] = await db.all<{ n: number }>("SELECT runs_recorded AS n FROM saved_query_versions WHERE query_name = 'busy'");
      assert.equal(Number(counter.n), 1000, 'every run counted');
      assert.deepEqual(await kept(store, 'busy', 1), newest(made, 5));
      const history = await store.listHistory({ limit: 100 });
      assert.deepEqual(
        history.filter((e) => e.kind === 'adhoc').map((e) => e.request_id),
        adhoc
          .slice(-3)
          .map((r) => r.request_id)
          .reverse(),
      );
    });

    test('runs of a deleted query are skipped; others in the batch are kept', async () => {
      const { store } = await ringStore(engine, 3);
      await addQuery(store, 'stays');
      await addQuery(store, 'goes');
      assert.equal(await store.deleteQuery('goes'), true);
      const batch = [...runs('goes', 1, 2), ...runs('stays', 1, 2)];
      assert.equal(await store.writeRuns(batch, 3), 2);
      assert.deepEqual(await kept(store, 'stays', 1), newest(batch.slice(2), 3));
      assert.deepEqual(await kept(store, 'goes', 1), []);
    });

    test('a lowered or raised limit re-slots the rings at start, keeping the newest', async () => {
      const { db, store } = await ringStore(engine, 6);
      await addQuery(store, 'q');
      const all = runs('q', 1, 15);
      for (let i = 0; i < all.length; i += 4) await store.writeRuns(all.slice(i, i + 4), 6);
      assert.equal(await store.resizeRings(6), false, 'same limit: nothing to do');
      // Lowered: the newest 4 stay, and the next runs overwrite the oldest of them.
      assert.equal(await store.resizeRings(4), true);
      assert.deepEqual(await kept(store, 'q', 1), newest(all, 4));
      const more = runs('q', 1, 3);
      all.push(...more);
      for (const r of more) await store.writeRuns([r], 4);
      assert.deepEqual(await kept(store, 'q', 1), newest(all, 4));
      // Raised: the 4 stay and the ring grows to the new size as runs arrive.
      assert.equal(await store.resizeRings(7), true);
      assert.deepEqual(await kept(store, 'q', 1), newest(all, 4));
      const later = runs('q', 1, 5);
      all.push(...later);
      await store.writeRuns(later.slice(0, 2), 7);
      assert.deepEqual(await kept(store, 'q', 1), newest(all.slice(0, -3), 6));
      await store.writeRuns(later.slice(2), 7);
      assert.deepEqual(await kept(store, 'q', 1), newest(all, 7));
      const slots = await db.all<{ slot: number }>('SELECT slot FROM run_history ORDER BY slot');
      assert.deepEqual(
        slots.map((s) => Number(s.slot)),
        [0, 1, 2, 3, 4, 5, 6],
      );
    });

    test('a version-3 store: history rows carry over, counted, and the next runs overwrite the oldest', async () => {
      const db = await engine.open();
      await migrate(db, 3);
      const store = new Store(db);
      await addQuery(store, 'old', 2);
      const insert = `INSERT INTO execution_history (query_name, version, executed_at, status, key_name, entry_json) VALUES (?, ?, ?, ?, ?, ?)`;
      const before: EventRow[] = [];
      for (const [v, n] of [
        [1, 3],
        [2, 2],
        [1, 2],
      ] as const) {
        for (const r of runs('old', v, n)) {
          await db.run(insert, [r.query, r.version, r.executed_at, r.status, r.key_name, JSON.stringify(r)]);
          before.push(r);
        }
      }
      await db.run(insert, [null, null, NOW, 'success', null, JSON.stringify(runs('x', 1, 1)[0])]); // no query: not history
      await migrate(db);
      const v1 = before.filter((r) => r.version === 1);
      const fromOld = await store.listHistory({ query: 'old', version: 1, limit: 100 });
      assert.deepEqual(
        fromOld.map((e) => e.request_id),
        newest(v1, 100),
      );
      assert.deepEqual(
        await store.runCounts('old'),
        new Map([
          [1, 5],
          [2, 2],
        ]),
      );
      const [counted] = await db.all<{ n: number }>("SELECT runs_recorded AS n FROM saved_query_versions WHERE query_name = 'old' AND version = 1");
      assert.equal(Number(counted.n), 5);
      // A limit of 4 at the first start: the newest 4 of version 1 stay, then new runs go round the ring.
      assert.equal(await store.resizeRings(4), true);
      assert.deepEqual(await kept(store, 'old', 1), newest(v1, 4));
      const next = runs('old', 1, 3);
      v1.push(...next);
      await store.writeRuns(next, 4);
      assert.deepEqual(await kept(store, 'old', 1), newest(v1, 4));
    });
  });
}

describe('history ring on PostgreSQL: size and concurrent instances', () => {
  test('thousands of runs into a few rings leave the table a few pages, not a heap of dead rows', async () => {
    const s = await scratchDatabase('qag_ring_size');
    const db = openPostgres(s.url, { max: 2 });
    try {
      await migrate(db);
      const store = new Store(db);
      await store.resizeRings(50);
      for (const q of ['a', 'b', 'c', 'd']) await addQuery(store, q);
      const size = async () => Number((await db.all<{ n: string }>("SELECT pg_relation_size('run_history') AS n"))[0].n);
      // 20 batches of 500 runs, each version getting 125 per batch: 10,000 runs, 200 kept.
      for (let b = 0; b < 20; b++) {
        await store.writeRuns(
          ['a', 'b', 'c', 'd'].flatMap((q) => runs(q, 1, 125)),
          50,
        );
        if (b === 1) assert.ok((await size()) > 0);
      }
      const pages = (await size()) / 8192;
      // 200 rows of ~400 bytes is 10 pages at fill factor 50; a table that kept every run would need ~500. Pruning
      // reclaims a dead row only once no snapshot can see it, so a busy server (another session's transaction) leaves
      // some for a while: 47 pages once in a CI run beside other work, 12 alone.
      assert.ok(pages <= 100, `run_history is ${pages} pages after 10,000 runs`);
      const [{ n }] = await db.all<{ n: string }>('SELECT count(*) AS n FROM run_history');
      assert.equal(Number(n), 200);
    } finally {
      await db.close();
      await s.drop();
    }
  });

  test('two instances writing the same versions at once: no deadlock, every run counted, the newest kept', async () => {
    const s = await scratchDatabase('qag_ring_two');
    const one = openPostgres(s.url, { max: 2 });
    const two = openPostgres(s.url, { max: 2 });
    try {
      await migrate(one);
      const a = new Store(one);
      const b = new Store(two);
      await a.resizeRings(4);
      for (const q of ['m', 'n', 'o']) await addQuery(a, q);
      // Each round, the two instances send the versions in opposite orders.
      const order = [
        ['m', 'n', 'o'],
        ['o', 'n', 'm'],
      ];
      for (let round = 0; round < 30; round++) {
        await Promise.all(
          [a, b].map((st, i) =>
            st.writeRuns(
              order[i].flatMap((q) => runs(q, 1, 3)),
              4,
            ),
          ),
        );
      }
      const counted = await one.all<{ n: number }>('SELECT runs_recorded AS n FROM saved_query_versions ORDER BY query_name');
      assert.deepEqual(
        counted.map((r) => Number(r.n)),
        [180, 180, 180],
      );
      for (const q of ['m', 'n', 'o']) assert.equal((await kept(a, q, 1)).length, 4);
    } finally {
      await one.close();
      await two.close();
      await s.drop();
    }
  });
});

test('end to end: QUERYAPIGATE_HISTORY_LIMIT=3 keeps the newest 3 calls of a version', async () => {
  const srv = await startTestServer({ QUERYAPIGATE_HISTORY_LIMIT: '3', QUERYAPIGATE_LOAD_EXAMPLES: '1' });
  try {
    const name = 'example_recent_rentals'; // a bundled example; each call asks for other hours, so none is a cache hit
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const r = await srv.call('GET', `/q/${name}?hours=${i + 1}`, { headers: { 'X-Request-Id': `ring-${i}` } });
      assert.equal(r.status, 200, r.text);
      ids.push(`ring-${i}`);
    }
    const history = await srv.call('GET', `/api/v1/queries/${name}/history`);
    assert.equal(history.status, 200);
    assert.deepEqual(
      history.json.items.map((e: { request_id: string }) => e.request_id),
      ids.slice(-3).reverse(),
    );
    const after = await srv.call('GET', `/api/v1/queries/${name}`);
    assert.deepEqual(
      after.json.versions.map((v: { run_count: number }) => v.run_count),
      [3],
    );
  } finally {
    await srv.stop();
  }
});
