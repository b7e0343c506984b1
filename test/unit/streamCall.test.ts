// Tests for a streamed export's executor side (call/streamCall.ts) against a made-up source, with the
// test playing the acceptor on the other end of the port: frames are bounded by bytes (a row larger
// than a frame goes alone), the bytes not yet credited stay within the window (the cursor waits), the
// next batch is sized by the bytes the rows took, raw values are asked for unless a mask applies, and
// a cancel ends the export with its run recorded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { StreamCredit, StreamFrame } from '../../src/contract/messages.js';
import type { CallContext } from '../../src/call/context.js';
import type { Governed } from '../../src/call/govern.js';
import type { CallPlan } from '../../src/call/plan.js';
import type { RunTarget } from '../../src/call/record.js';
import type { CallRequest } from '../../src/call/request.js';
import { BATCH_BYTES, FRAME_BYTES, streamCall, WINDOW_BYTES } from '../../src/call/streamCall.js';
import type { RunRecord } from '../../src/contract/messages.js';
import type { BatchHandler, Source, StreamOptions } from '../../src/sources/types.js';

interface Asked {
  batchRows: number;
  raw: boolean | undefined;
}

/** A source of `total` rows (id, a text of `width` characters), handed in batches of what opts.batchRows says. */
function fakeSource(total: number, width: (i: number) => number, asked: Asked[]): Source {
  return {
    dialect: 'postgres',
    async stream(_text: string, _values: unknown[], opts: StreamOptions, onBatch: BatchHandler) {
      let i = 0;
      do {
        const n = Math.max(1, Math.floor(opts.batchRows));
        asked.push({ batchRows: n, raw: opts.raw });
        const rows: unknown[][] = [];
        for (; rows.length < n && i < total; i++) rows.push([i, 'x'.repeat(width(i))]);
        await onBatch(['id', 'pad'], rows);
      } while (i < total);
      return total;
    },
  } as unknown as Source;
}

function harness(streamMaxRows = 0) {
  const runs: RunRecord[] = [];
  const ctx = {
    config: { streamMaxRows },
    runs: { add: (r: RunRecord) => runs.push(r) },
    metrics: { streamExports: { inc() {} }, rows: { inc() {} } },
  } as unknown as CallContext;
  const plan = { text: 'select', writers: new Map(), lastWriter: null, write: false } as unknown as CallPlan;
  const req = { format: 'csv', page: null, pageSize: null } as unknown as CallRequest;
  const run: RunTarget = { query: 'q', version: 1, connectionName: 'c', executedAt: new Date().toISOString(), transport: 'rest' };
  return { runs, ctx, plan, req, run };
}

/** The acceptor's end: frames as they come; `credit` hands a data frame's credit (and buffer) back. */
function acceptor(port: MessagePort) {
  const frames: StreamFrame[] = [];
  /** Each data frame's bytes as they came (a credit moves its buffer back, as uWS has copied them). */
  const bytes: Buffer[] = [];
  const waiting: StreamFrame[] = [];
  let notify: (() => void) | null = null;
  let last: () => void = () => {};
  const ended = new Promise<void>((r) => (last = r));
  port.on('message', (f: StreamFrame) => {
    frames.push(f);
    if (f.t === 'data') {
      waiting.push(f);
      bytes.push(Buffer.from(typeof f.chunk === 'string' ? Buffer.from(f.chunk) : f.chunk));
    }
    if (f.t === 'end' || f.t === 'fail') last();
    notify?.();
  });
  const credit = (f: StreamFrame) => {
    if (f.t !== 'data') return;
    if (typeof f.chunk === 'string') port.postMessage({ t: 'more' } satisfies StreamCredit);
    else port.postMessage({ t: 'more', buf: f.chunk.buffer as ArrayBuffer } satisfies StreamCredit, [f.chunk.buffer as ArrayBuffer]);
  };
  return {
    frames,
    bytes,
    waiting,
    credit,
    /** Resolves once the end (or fail) frame came. */
    ended,
    /** Resolves once nothing new came for `ms`. */
    async quiet(ms = 100): Promise<void> {
      for (;;) {
        const before = frames.length;
        await new Promise<void>((r) => {
          notify = r;
          setTimeout(r, ms);
        });
        notify = null;
        if (frames.length === before) return;
      }
    },
  };
}

const bytesOf = (f: StreamFrame) => (f.t !== 'data' ? 0 : typeof f.chunk === 'string' ? Buffer.byteLength(f.chunk) : f.chunk.byteLength);

test('frames are bounded by bytes, batches are sized by bytes, and every byte arrives', async () => {
  const { ctx, plan, req, run, runs } = harness();
  const { port1, port2 } = new MessageChannel();
  const a = acceptor(port1);
  port1.on('message', (f: StreamFrame) => a.credit(f)); // a fast client
  const asked: Asked[] = [];
  const total = 20_000;
  // Rows of about 100 bytes; row 7000 is larger than a frame.
  const width = (i: number) => (i === 7000 ? FRAME_BYTES + 1000 : 90 + (i % 7));
  const unmasked: Governed = { masker: null, masked: null };
  await streamCall(ctx, port2, req, plan, fakeSource(total, width, asked), [], 0, unmasked, run, 'f', 'key', 'r1');
  await a.ended;
  const expected = `id,pad\r\n${Array.from({ length: total }, (_, i) => `${i},${'x'.repeat(width(i))}\r\n`).join('')}`;
  assert.equal(Buffer.concat(a.bytes).toString(), expected);
  assert.equal(a.frames.at(-1)?.t, 'end');
  for (const b of a.bytes) {
    if (b.byteLength > FRAME_BYTES) assert.equal(b.toString(), `7000,${'x'.repeat(width(7000))}\r\n`, 'only the large row goes alone');
  }
  assert.equal(a.bytes.filter((b) => b.byteLength > FRAME_BYTES).length, 1);
  // The first batch is a guess; the next ones ask for about BATCH_BYTES of rows of ~100 bytes.
  assert.ok(asked.length > 2);
  // (but the one after the batch with the large row, whose rows took more on average).
  const off = asked.slice(1, -1).filter((a) => Math.abs(a.batchRows * 100 - BATCH_BYTES) > BATCH_BYTES * 0.2);
  assert.ok(off.length <= 1, `batches of ${asked.map((a) => a.batchRows).join(', ')} rows`);
  assert.ok(
    asked.every((a) => a.raw === true),
    'an unmasked text export asks for raw values',
  );
  assert.equal(runs.length, 1);
  assert.equal(runs[0]!.status, 'success');
  assert.equal(runs[0]!.rows, total);
});

test('a client that does not read holds the export within the window; a cancel ends it', async () => {
  const { ctx, plan, req, run, runs } = harness();
  const { port1, port2 } = new MessageChannel();
  const a = acceptor(port1);
  const asked: Asked[] = [];
  const masked: Governed = { masker: (columns, rows) => ({ columns, rows }), masked: null };
  const done = streamCall(
    ctx,
    port2,
    req,
    plan,
    fakeSource(1_000_000, () => 100, asked),
    [],
    0,
    masked,
    run,
    'f',
    'key',
    'r2',
  );
  await a.quiet();
  // Counted as the window counts them: a string by its bytes, a buffer by its whole size.
  const uncredited = () => a.waiting.reduce((n, f) => n + (f.t === 'data' && typeof f.chunk !== 'string' ? f.chunk.buffer.byteLength : bytesOf(f)), 0);
  assert.ok(uncredited() <= WINDOW_BYTES, `${uncredited()} bytes in flight`);
  const batches = asked.length;
  assert.ok(batches < 10, `the cursor waits: ${batches} batches asked for`);
  assert.ok(
    asked.every((a) => a.raw === false),
    'a masked export takes values',
  );
  // Two credits: the export goes on, about two frames' worth, then waits again.
  a.credit(a.waiting.shift()!);
  a.credit(a.waiting.shift()!);
  await a.quiet();
  assert.ok(asked.length > batches && asked.length < batches + 6);
  assert.ok(uncredited() <= WINDOW_BYTES);
  port1.postMessage({ t: 'cancel' } satisfies StreamCredit);
  await done;
  assert.equal(runs[0]!.status, 'error');
  assert.equal(runs[0]!.error, 'The client closed the stream');
});

test('the row cap: one row past it is enough to know the export is cut', async () => {
  const { ctx, plan, req, run, runs } = harness(1500);
  const { port1, port2 } = new MessageChannel();
  const a = acceptor(port1);
  port1.on('message', (f: StreamFrame) => a.credit(f));
  const asked: Asked[] = [];
  await streamCall(
    ctx,
    port2,
    req,
    plan,
    fakeSource(100_000, () => 10, asked),
    [],
    0,
    { masker: null, masked: null },
    run,
    'f',
    'key',
    'r3',
  );
  await a.ended;
  const lines = Buffer.concat(a.bytes).toString().split('\r\n');
  assert.equal(lines.at(-2), '# truncated after 1500 rows');
  assert.equal(lines.length, 1 + 1500 + 2);
  assert.equal(
    asked.reduce((n, x) => n + x.batchRows, 0),
    1501,
    'no rows fetched past the one that shows the cut',
  );
  assert.equal(runs[0]!.rows, 1500);
});
