// Tests for runs as they cross to the recorder: packed (contract/runs.ts) and read back as the same
// records, in the order the store gives them back, through a real BroadcastChannel from a RunBatcher that
// stays bounded and counts what it refuses; a run's payload JSON, as the event log and history keep it; and
// COPY text written from bytes (store/sql.ts CopyText) as copyField writes the same text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { channel, type EventRow, type RunBatch, type RunRecord } from '../../src/contract/messages.js';
import { packRuns, payloadEnd, payloadJson, payloadStart, payloadText, unpackEvents, unpackRuns } from '../../src/contract/runs.js';
import { RunBatcher } from '../../src/recorder/batcher.js';
import { CopyText, copyField } from '../../src/store/sql.js';

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

/** A run's fields in the order the store gives them back (store/events.ts runOf): the columns, then the payload's. */
const stored = ({ query, executed_at, status, key_name, ...rest }: RunRecord): RunRecord => ({ query, executed_at, status, key_name, ...rest });

test('packed runs unpack to the same records, nulls, zeros and optional fields included, in the order the store gives', () => {
  const odd = { ...saved, connection_name: 'wäre\\house "\n\t', request_id: 'r-4 \u2028 😀', key_name: 'ключ' };
  const runs = [saved, failed, adhoc, odd, { ...saved, request_id: 'r-5' }];
  const back = unpackRuns(structuredClone(packRuns(runs)));
  assert.deepEqual(back, runs);
  for (let i = 0; i < runs.length; i++) assert.equal(JSON.stringify(back[i]), JSON.stringify(stored(runs[i])));
});

test("a batch keeps each repeated text once, and every run's payload as UTF-8 bytes, one after another", () => {
  const runs = Array.from({ length: 100 }, (_, i) => ({ ...saved, request_id: `r-${i}`, connection_name: i % 2 ? 'é' : 'e' }));
  const packed = packRuns(runs);
  // query, executed_at and key once each; the rest is in the payloads
  assert.equal(packed.texts.length, 3);
  assert.equal(payloadStart(packed, 0), 0);
  for (let i = 0; i < runs.length; i++) {
    if (i > 0) assert.equal(payloadStart(packed, i), payloadEnd(packed, i - 1));
    assert.equal(payloadText(packed, i), payloadJson(runs[i]));
  }
  assert.equal(payloadEnd(packed, 99), packed.payloads.length);
  assert.equal(packed.payloads.length, Buffer.byteLength(runs.map(payloadJson).join('')));
});

test('a packer grows for long payloads and starts each batch empty', async () => {
  const { RunPacker } = await import('../../src/contract/runs.js');
  const packer = new RunPacker(4);
  const long = { ...failed, error: 'é'.repeat(5000) };
  packer.add(saved);
  packer.add(long);
  packer.add(adhoc);
  const first = packer.take();
  assert.deepEqual(unpackRuns(first), [saved, long, adhoc]);
  assert.equal(first.backslashes, true, "the ad-hoc run's SQL has a quote and a newline, escaped in its JSON");
  packer.add(failed);
  const second = packer.take();
  assert.equal(second.n, 1);
  assert.deepEqual(unpackRuns(second), [failed]);
  assert.equal(second.payloads.length, Buffer.byteLength(payloadJson(failed)));
  assert.equal(second.backslashes, false);
});

test('events unpack with their ids first, in order across batches, as the event log returns them', () => {
  const batches = [packRuns([saved, failed]), packRuns([adhoc])];
  const back = unpackEvents(structuredClone(batches), 2 ** 40);
  const events: EventRow[] = [saved, failed, adhoc].map((r, i) => Object.assign({ id: 2 ** 40 + i }, stored(r)));
  assert.deepEqual(back, events);
  for (let i = 0; i < events.length; i++) assert.deepEqual(Object.keys(back[i]), Object.keys(events[i]));
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
  const runs = [saved, failed, adhoc, odd, nulls, { ...saved, kind: 'adhoc' as const, duration_ms: 0.1 + 0.2 }];
  for (const run of [...runs, ...unpackRuns(packRuns(runs)), ...runs.map((r, i) => ({ ...r, id: i + 1 }))]) {
    const { id, executed_at, query, key_name, status, ...rest } = run as RunRecord & { id?: number };
    assert.equal(payloadJson(run), JSON.stringify(rest));
  }
});

test("JSON's bytes go into COPY as copyField puts the text, and a writer's pieces make the lines it was given", () => {
  const texts = ['plain', 'quote " and backslash \\', 'tab\tnew\nline\rreturn', '\\\\N', 'é \u2028 \u0000 😀', ''];
  const jsons = texts.map((t) => JSON.stringify({ t, more: [t] }));
  const bytes = Buffer.from(jsons.join(''));
  const w = new CopyText();
  const pieces: Buffer[] = [];
  let expected = '';
  for (let round = 0; round < 400; round++) {
    for (let i = 0, from = 0; i < jsons.length; i++) {
      const to = from + Buffer.byteLength(jsons[i]);
      const piece = w.line(64 + 2 * (to - from) + 3 * texts[i].length);
      if (piece) pieces.push(Buffer.from(piece));
      w.int(round * 10 + i);
      w.tab();
      w.text(copyField(texts[i]));
      w.tab();
      w.json(bytes, from, to, true);
      w.end();
      expected += `${round * 10 + i}\t${copyField(texts[i])}\t${copyField(jsons[i])}\n`;
      from = to;
    }
  }
  const last = w.rest();
  if (last) pieces.push(Buffer.from(last));
  assert.ok(pieces.length > 1, 'more than one piece');
  for (const p of pieces.slice(0, -1)) assert.ok(p.length <= 64 * 1024 && p.length > 60 * 1024, `a piece of ${p.length} bytes`);
  assert.equal(Buffer.concat(pieces).toString(), expected);
  // A source without backslashes goes as it is.
  const plain = Buffer.from('{"a":"é"}');
  const v = new CopyText();
  v.line(100);
  v.json(plain, 0, plain.length, false);
  assert.equal(v.rest()!.toString(), '{"a":"é"}');
});
