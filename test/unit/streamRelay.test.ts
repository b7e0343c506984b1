// Tests for a streamed export's acceptor side (http/streamRelay.ts), with the test playing the
// executor and the socket: each chunk is credited once the socket took it (at once, or on drain), in
// order, with a binary chunk's buffer moved back for the executor to fill again; a client that leaves
// cancels the export.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MessagePort } from 'node:worker_threads';
import type { Answer, Request } from '../../src/contract/exchange.js';
import type { StreamCredit, StreamFrame } from '../../src/contract/messages.js';
import type { Dispatcher } from '../../src/http/dispatch.js';
import type { StreamOut, StreamStart } from '../../src/http/respond.js';
import { relayStream } from '../../src/http/streamRelay.js';

/** A socket that takes `room` chunks, then backs up until drain() is called. */
function socket(room: number) {
  const written: Buffer[] = [];
  let drains: (() => void)[] = [];
  let closers: ((stalled: boolean) => void)[] = [];
  let ended = false;
  let taken = 0;
  const out: StreamOut = {
    closed: false,
    write(chunk) {
      written.push(Buffer.from(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)); // uWS copies what it keeps
      return ++taken <= room;
    },
    buffered: () => 0,
    onDrain(fn) {
      drains.push(fn);
    },
    end() {
      ended = true;
      for (const f of closers) f(false);
    },
    abort() {
      for (const f of closers) f(false);
    },
    onClose(fn) {
      closers.push(fn);
    },
  };
  return {
    out,
    written,
    ended: () => ended,
    drain() {
      taken = 0;
      const d = drains;
      drains = [];
      for (const f of d) f();
    },
    leave() {
      const c = closers;
      closers = [];
      for (const f of c) f(false);
    },
  };
}

/** A dispatcher whose executor is the test: `play` gets the export's port. */
function executor(play: (port: MessagePort) => void): Dispatcher {
  return {
    run(req: Request): Promise<Answer> {
      play(req.port!);
      return new Promise(() => {}); // a stream's call answers only when it ends; not needed here
    },
  } as unknown as Dispatcher;
}

const request = { method: 'GET', url: '/q/x', query: 'stream=true', requestId: 'r' } as unknown as Request;
const tick = () => new Promise((r) => setTimeout(r, 20));

test('chunks are credited once the socket took them, with their buffers moved back', async () => {
  const credits: StreamCredit[] = [];
  let port!: MessagePort;
  const started = relayStream(
    request,
    executor((p) => {
      port = p;
      p.on('message', (m: StreamCredit) => credits.push(m));
      p.postMessage({ t: 'head', status: 200, headers: ['Content-Type', 'text/csv'], key: 'k' } satisfies StreamFrame);
    }),
  );
  const head = (await started) as StreamStart;
  assert.equal(head.status, 200);
  const s = socket(2);
  head.start(s.out);
  const frame = (text: string) => {
    const buf = new ArrayBuffer(64);
    const bytes = Buffer.from(text);
    new Uint8Array(buf).set(bytes);
    port.postMessage({ t: 'data', chunk: new Uint8Array(buf, 0, bytes.length) } satisfies StreamFrame, [buf]);
  };
  port.postMessage({ t: 'data', chunk: 'id\r\n' } satisfies StreamFrame);
  frame('1\r\n');
  frame('2\r\n'); // the socket backs up here
  frame('3\r\n');
  await tick();
  assert.equal(Buffer.concat(s.written).toString(), 'id\r\n1\r\n2\r\n3\r\n');
  assert.equal(credits.length, 2, "the chunks past the socket's room wait for its drain");
  assert.deepEqual(credits[0], { t: 'more' }, 'a string has no buffer to give back');
  assert.equal(credits[1]!.t === 'more' && credits[1]!.buf?.byteLength, 64, "the frame's whole buffer comes back");
  s.drain();
  await tick();
  assert.equal(credits.length, 4);
  assert.ok(credits.slice(2).every((c) => c.t === 'more' && c.buf?.byteLength === 64));
  port.postMessage({ t: 'end' } satisfies StreamFrame);
  await tick();
  assert.ok(s.ended());
});

test('a client that leaves cancels the export', async () => {
  const credits: StreamCredit[] = [];
  const started = relayStream(
    request,
    executor((p) => {
      p.on('message', (m: StreamCredit) => credits.push(m));
      p.postMessage({ t: 'head', status: 200, headers: [], key: 'k' } satisfies StreamFrame);
    }),
  );
  const head = (await started) as StreamStart;
  const s = socket(10);
  head.start(s.out);
  s.leave();
  await tick();
  assert.deepEqual(credits, [{ t: 'cancel' }]);
});
