// Tests for runs as they cross to the recorder thread: packed (contract/runs.ts) and unpacked to the
// same records, field order included (history and the event log keep their JSON), through a real
// BroadcastChannel from a RunBatcher that stays bounded and counts what it refuses; and a run's
// payload JSON, as the event log and history keep it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { channel, type EventRow, type RunBatch, type RunRecord } from '../../src/contract/messages.js';
import { packRuns, RunPacker, unpackEvents, unpackRuns } from '../../src/contract/runs.js';
import { RunBatcher } from '../../src/recorder/batcher.js';
import { payloadJson } from '../../src/store/events.js';
import { copyField, copyJson } from '../../src/store/sql.js';

const saved: RunRecord = {
  query: 'films',
  version: 3,
  kind: 'saved',
  executed_at: '2026-12-02 09:30:00',
  status: 'success',
  connection_name: 'warehouse',
  key_name: 'reader',
  request_id: 'r-1',
  rows: 12,
  duration_ms: 4.25,
  serialization_ms: 0.5,
  transport: 'rest',
};
const failed: RunRecord = {
  ...saved,
  status: 'error',
  request_id: 'r-2',
  rows: null,
  duration_ms: null,
  serialization_ms: null,
  error: 'canceling statement due to statement timeout',
  code: 'query_timeout',
  masked: [{ column: 'email', action: 'hash' }],
};
const adhoc: RunRecord = {
  query: null,
  version: null,
  kind: 'adhoc',
  executed_at: '2026-12-02 09:30:01',
  status: 'success',
  connection_name: null,
  key_name: null,
  request_id: 'r-3',
  rows: 0,
  duration_ms: 0,
  serialization_ms: 0,
  transport: 'mcp',
  params: ['a', 'b'],
  sql: 'SELECT $a, $b -- "quoted"\n',
  sql_truncated: true,
};

test('packed runs unpack to the same records, nulls, zeros and optional fields included, in the same field order', () => {
  const runs = [saved, failed, adhoc, { ...saved, request_id: 'r-4' }];
  const back = unpackRuns(structuredClone(packRuns(runs)));
  assert.deepEqual(back, runs);
  for (let i = 0; i < runs.length; i++) assert.equal(JSON.stringify(back[i]), JSON.stringify(runs[i]));
});

test('a batch keeps each repeated text once', () => {
  const runs = Array.from({ length: 100 }, (_, i) => ({ ...saved, request_id: `r-${i}` }));
  const packed = packRuns(runs);
  // query, executed_at, connection, key, transport once each, and the 100 request ids
  assert.equal(packed.texts.length, 5 + 100);
});

test('a packer used batch after batch gives each run its own texts, whatever the run before it had', () => {
  const packer = new RunPacker(64);
  const other = { ...saved, key_name: 'warehouse', connection_name: 'reader', executed_at: '2026-12-02 09:30:01', transport: 'mcp' as const };
  const runs = [saved, saved, other, adhoc, saved, failed, other, other, adhoc, adhoc, saved];
  for (const batch of [runs, [...runs].reverse(), [adhoc, saved], [saved, adhoc]]) {
    for (const r of batch) packer.add(r);
    assert.deepEqual(unpackRuns(structuredClone(packer.take())), batch);
  }
});

test("governed runs holding one mask list unpack holding one list again; another list, or a failure's fields, stay their own", () => {
  type List = NonNullable<RunRecord['masked']>;
  const hashed: List = [{ column: 'abalance', action: 'hash' }];
  const governed = (request_id: string, list: List = hashed): RunRecord => ({ ...saved, request_id, masked: list });
  const packer = new RunPacker(64);
  const runs = [governed('g1'), governed('g2'), governed('g3', [{ column: 'abalance', action: 'drop' }]), governed('g4', [...hashed]), failed, governed('g5')];
  for (const batch of [runs, [...runs].reverse()]) {
    for (const r of batch) packer.add(r);
    const packed = structuredClone(packer.take());
    const back = unpackRuns(packed);
    assert.deepEqual(back, batch);
    for (let i = 0; i < batch.length; i++) assert.equal(JSON.stringify(back[i]), JSON.stringify(batch[i]));
    const lists = new Set(back.filter((r) => r.status === 'success').map((r) => r.masked));
    assert.equal(lists.size, 2, 'one list for every run whose list had the same text, one for the other');
    assert.equal(packed.texts.filter((x) => x.includes('abalance')).length, 2, 'each list text once in the batch');
  }
});

test('events unpack with their ids first, as the event log returns them', () => {
  const events: EventRow[] = [Object.assign({ id: 41 }, saved), Object.assign({ id: 2 ** 40 }, adhoc)];
  const back = unpackEvents(structuredClone(packRuns(events)));
  assert.deepEqual(back, events);
  assert.deepEqual(Object.keys(back[0]), Object.keys(events[0]));
});

test('the batcher posts its runs packed, holds at most its bound and counts the runs it refused', async () => {
  const scope = `test-${process.pid}-${Date.now()}`;
  const runs = channel('runs', scope);
  const got: RunBatch[] = [];
  runs.onmessage = (e: MessageEvent) => got.push(e.data as RunBatch);
  const batcher = new RunBatcher(3, scope);
  const made = Array.from({ length: 5 }, (_, i) => ({ ...saved, request_id: `r-${i}` }));
  for (const r of made) batcher.add(r);
  batcher.flush(true);
  batcher.add(failed); // a new batch starts empty
  batcher.flush();
  for (let waited = 0; got.length < 2 && waited < 5000; waited += 10) await new Promise((r) => setTimeout(r, 10));
  batcher.close();
  runs.close();
  assert.equal(got.length, 2);
  assert.deepEqual(unpackRuns(got[0].runs), made.slice(0, 3));
  assert.equal(got[0].dropped, 2);
  assert.equal(got[0].final, true);
  assert.deepEqual(unpackRuns(got[1].runs), [failed]);
  assert.equal(got[1].dropped, 0);
});

test("a run's payload (payloadJson) is the text JSON.stringify makes of its other fields, every shape alike", () => {
  const odd: RunRecord = {
    ...saved,
    connection_name: 'ware"house\\\n\u2028é',
    request_id: 'r\t5',
    transport: 'mcp',
    rows: 0,
    duration_ms: -0,
    serialization_ms: 1e21,
  };
  const nulls: RunRecord = { ...saved, version: null, connection_name: null, rows: null, duration_ms: Number.NaN, serialization_ms: Infinity };
  // Transports beyond the 16 whose JSON is kept, each twice (made, then kept or made again).
  const transports = Array.from({ length: 40 }, (_, i) => ({ ...saved, transport: `t"${i % 20}\\é` }));
  const runs = [saved, failed, adhoc, odd, nulls, { ...saved, kind: 'adhoc' as const, duration_ms: 0.1 + 0.2 }, ...transports];
  for (const run of [...runs, ...unpackRuns(packRuns(runs)), ...runs.map((r, i) => ({ ...r, id: i + 1 }))]) {
    const { id, executed_at, query, key_name, status, ...rest } = run as RunRecord & { id?: number };
    assert.equal(payloadJson(run), JSON.stringify(rest));
  }
});

test('a JSON text goes into COPY as copyField puts any text', () => {
  const texts = ['plain', 'quote " and backslash \\', 'tab\tnew\nline\rreturn', '\\\\N', 'é \u2028 \u0000', ''];
  for (const t of texts) {
    const json = JSON.stringify({ t, more: [t] });
    assert.equal(copyJson(json), copyField(json));
  }
});
