// The recorder thread's writes, driven as the thread drives them (src/recorder/recorder.ts) on a SQLite
// store: packed batches taken off the runs channel, every run in the event log at once, and history
// written in larger batches: once enough runs wait, at each flush interval, and whenever asked.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { channel, type EventRow, type RunBatch, type RunRecord } from '../../src/contract/messages.js';
import { packRuns } from '../../src/contract/runs.js';
import { RunBatcher } from '../../src/recorder/batcher.js';
import { Recorder, type RecorderPlace, type RecorderSettings } from '../../src/recorder/recorder.js';
import { openStore, type Store } from '../../src/store/store.js';
import { eventRows } from '../../src/store/events.js';

const NOW = '2026-12-02 10:00:00';

function run(i: number): RunRecord {
  return {
    query: 'films',
    version: 1,
    kind: 'saved',
    executed_at: NOW,
    status: 'success',
    connection_name: 'main',
    key_name: 'reader',
    request_id: `r${i}`,
    rows: i,
    duration_ms: 1,
    serialization_ms: 0,
    transport: 'rest',
  };
}

async function withRecorder(
  settings: Partial<RecorderSettings>,
  fn: (r: {
    recorder: Recorder;
    store: Store;
    post: (runs: RunRecord[]) => void;
    events: EventRow[];
    /** The runs each onEvents call was handed, as they were handed. */
    handed: RunRecord[][];
    settings: RecorderSettings;
  }) => Promise<void>,
  place: RecorderPlace = 'thread',
) {
  const home = mkdtempSync(join(tmpdir(), 'qag-recorder-'));
  const store = await openStore({ home, databaseUrl: null });
  const fields = { sql: 'SELECT 1', connection_name: 'main', parameters: {}, description: '', author: null, tags: [], cache_ttl: null, uuid: 'films-1' };
  await store.createQuery({ name: 'films', collection: null, example: false }, fields, true, NOW);
  const events: EventRow[] = [];
  const handed: RunRecord[][] = [];
  const all: RecorderSettings = {
    home,
    databaseUrl: null,
    logLevel: 'off',
    jsonLogs: false,
    historyLimit: 50,
    eventRetention: 3600,
    historyFlushInterval: 60,
    historyMaxPending: 10_000,
    ...settings,
  };
  const recorder = new Recorder(
    all,
    (runs, first) => {
      handed.push(runs);
      events.push(...eventRows(runs, first));
    },
    undefined,
    place,
  );
  const runs = channel('runs', home);
  const post = (list: RunRecord[]) => runs.postMessage({ runs: packRuns(list), dropped: 0 } satisfies RunBatch);
  try {
    await fn({ recorder, store, post, events, handed, settings: all });
  } finally {
    runs.close();
    await recorder.close(0);
    await store.close();
    rmSync(home, { recursive: true, force: true });
  }
}

async function until(check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; !(await check()); ) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

const history = async (store: Store) => (await store.listHistory({ limit: 100 })).map((e) => e.request_id).sort();

test('runs reach the event log at once; history waits for enough of them, or for a flush that asks', async () => {
  // A pending bound of 10 makes history batches of 5.
  await withRecorder({ historyMaxPending: 10 }, async ({ recorder, store, post, events }) => {
    post([run(1), run(2), run(3)]);
    await until(() => recorder.pending === 3);
    await recorder.flush();
    assert.deepEqual(
      events.map((e) => e.request_id),
      ['r1', 'r2', 'r3'],
    );
    assert.deepEqual(await history(store), []); // 3 waiting: fewer than a history batch
    assert.equal(recorder.pending, 3); // still held, so still within the bound
    post([run(4), run(5)]);
    await until(() => recorder.pending === 5);
    await recorder.flush();
    assert.deepEqual(await history(store), ['r1', 'r2', 'r3', 'r4', 'r5']);
    post([run(6)]);
    await until(() => recorder.pending === 1);
    await recorder.flush(true); // a history read
    assert.equal((await history(store)).length, 6);
    assert.equal(recorder.pending, 0);
  });
});

test("a version's runs beyond twice its ring are not held: they neither bring history's write forward nor count toward the bound", async () => {
  // A pending bound of 10 makes history batches of 5 held runs; a ring of 2 holds at most 3 of one version.
  await withRecorder({ historyMaxPending: 10, historyLimit: 2 }, async ({ recorder, store, post, events }) => {
    for (let b = 0; b < 6; b++) {
      post(Array.from({ length: 5 }, (_, i) => run(5 * b + i + 1)));
      await until(() => recorder.pending >= 5);
      await recorder.flush();
      assert.ok(recorder.pending <= 3, `held after the event log's write: ${recorder.pending}`);
    }
    assert.equal(events.length, 30); // nothing dropped
    assert.deepEqual(await history(store), []); // 30 runs came, but never 5 held
    await recorder.flush(true); // a history read
    assert.deepEqual(await history(store), ['r29', 'r30']);
    assert.equal(recorder.pending, 0);
  });
});

test('history is written at the flush interval without being asked', async () => {
  await withRecorder({ historyFlushInterval: 0.1 }, async ({ store, post }) => {
    post([run(1), run(2)]);
    await until(async () => (await history(store)).length === 2);
    assert.deepEqual(await history(store), ['r1', 'r2']);
  });
});

test("the event log is written once 2,000 runs wait on the recorder's own thread, 1,000 on the acceptor's", async () => {
  const runs = (from: number, n: number) => Array.from({ length: n }, (_, i) => run(from + i));
  await withRecorder({}, async ({ recorder, post, events }) => {
    post(runs(0, 500));
    await until(() => recorder.pending === 500);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(events.length, 0); // no flush interval (60 s) came, and 500 are not enough
    post(runs(500, 1500));
    await until(() => events.length === 2000);
  });
  await withRecorder(
    {},
    async ({ post, events }) => {
      post(runs(0, 999));
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(events.length, 0); // 999 are not enough
      post(runs(999, 1));
      await until(() => events.length === 1000);
      assert.deepEqual(
        events.map((e) => e.rows),
        runs(0, 1000).map((r) => r.rows),
      );
    },
    'here',
  );
});

test("a batcher on the recorder's own thread hands it its runs as they are; once no recorder is there, it posts them", async () => {
  await withRecorder(
    {},
    async ({ recorder, settings, handed, events }) => {
      const batcher = new RunBatcher(1000, settings.home);
      const elsewhere = new RunBatcher(1000, `${settings.home}-elsewhere`); // another home: its batches are posted
      try {
        const mine = [run(1), run(2), run(3)];
        for (const r of mine) batcher.add(r);
        elsewhere.add(run(9));
        elsewhere.flush();
        batcher.flush();
        assert.equal(recorder.pending, 3); // taken within the flush, before any message could be read
        await recorder.flush();
        assert.equal(handed.length, 1);
        assert.equal(handed[0].length, 3);
        for (let i = 0; i < 3; i++) assert.equal(handed[0][i], mine[i]); // the objects themselves: nothing packed or rebuilt
        assert.deepEqual(
          events.map((e) => e.request_id),
          ['r1', 'r2', 'r3'],
        );
        // A flush request is answered the same way: the recorder counts this batcher's answer at once.
        batcher.add(run(4));
        batcher.flush(false, 7);
        await recorder.flushAfter(7, 1); // waits a second for an answer it did not count
        assert.deepEqual(
          events.map((e) => e.request_id),
          ['r1', 'r2', 'r3', 'r4'],
        );
        // A newer recorder for the same home on this thread takes over; an older one closing leaves it in place.
        const second = new Recorder(settings, undefined, undefined, 'here');
        const third = new Recorder(settings, undefined, undefined, 'here');
        try {
          await second.close(0);
          batcher.add(run(5));
          batcher.flush();
          assert.equal(third.pending, 1);
          assert.equal(second.pending, 0);
        } finally {
          await third.close(0);
        }
        // With no recorder on this thread, the batch is posted on the runs channel.
        const heard: RunBatch[] = [];
        const runs = channel('runs', settings.home);
        runs.onmessage = (e: MessageEvent) => heard.push(e.data as RunBatch);
        try {
          batcher.add(run(6));
          batcher.flush();
          await until(() => heard.length === 1);
          assert.equal(heard[0].runs.n, 1);
        } finally {
          runs.close();
        }
      } finally {
        batcher.close();
        elsewhere.close();
      }
    },
    'here',
  );
});
