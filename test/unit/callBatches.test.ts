// Tests for how batched calls reach the executors (http/callBatches.ts, with call/answerBatches.ts in
// the threads of a real piscina pool, test/unit/batchWorker.ts): on an executor's own calls channel once
// it says it listens (piscina tasks before), the executor with the fewest calls in hand first, and the
// calls in the hands of an executor that dies failed with it, then served by its replacement.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { Piscina } from 'piscina';
import { ADDRESS_UNREAD, type Answer, type Request } from '../../src/contract/exchange.js';
import { channel } from '../../src/contract/messages.js';
import { type BatcherHooks, type CallBatcher, createCallBatcher } from '../../src/http/callBatches.js';

const request = (query: string): Request => ({
  method: 'GET',
  url: '/q/t',
  query,
  requestId: query,
  apiKey: 'k',
  ifNoneMatch: '',
  lastEventId: '',
  ip: '',
  body: null,
  started: 0,
});
const answered = (a: Answer) => JSON.parse(String(a.body)) as { query: string; thread: number };

async function withPool(threads: number, fn: (pool: Piscina, batcher: CallBatcher) => Promise<void>, hooks?: Partial<BatcherHooks>): Promise<void> {
  const scope = `test-${randomUUID()}`;
  const pool = new Piscina({
    filename: new URL('./batchWorker.js', import.meta.url).href,
    minThreads: threads,
    maxThreads: threads,
    concurrentTasksPerWorker: 64,
    atomics: 'disabled',
    workerData: scope,
  });
  const batcher = createCallBatcher(pool, scope, { running: 1000, queue: 1000 }, hooks);
  const alive = setInterval(() => {}, 1000); // the channels are unref'd
  try {
    await fn(pool, batcher);
  } finally {
    clearInterval(alive);
    batcher.close();
    await pool.destroy();
  }
}

/** Calls `queries` in one turn (one batch); every answer must be its own call's. */
async function batch(batcher: CallBatcher, queries: string[]): Promise<number[]> {
  const answers = await Promise.all(queries.map((q) => batcher.run(request(q), 'call')));
  return answers.map((a, i) => {
    assert.equal(a.status, 200);
    assert.equal(answered(a).query, queries[i]);
    return answered(a).thread;
  });
}

/** Batches until one goes without a piscina task: every executor of `threads` then listens on its calls channel. */
async function untilListening(pool: Piscina, batcher: CallBatcher, threads: number): Promise<void> {
  const seen = new Set<number>();
  for (const end = Date.now() + 10_000; Date.now() < end; ) {
    const tasks = pool.completed;
    // Slow calls in two turns: with two executors listening, the second batch goes to the other.
    const slow = batch(batcher, ['wait=30', 'wait=30']);
    await new Promise((r) => setImmediate(r));
    for (const t of [...(await batch(batcher, ['wait=1'])), ...(await slow)]) seen.add(t);
    if (pool.completed === tasks && seen.size >= threads) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('the executors never listened');
}

test('once an executor says it listens, batches reach it on its calls channel, not as piscina tasks', { timeout: 30_000 }, async () => {
  await withPool(1, async (pool, batcher) => {
    await untilListening(pool, batcher, 1);
    const tasks = pool.completed;
    for (let round = 0; round < 5; round++)
      await batch(
        batcher,
        Array.from({ length: 20 }, (_, i) => `q${round}-${i}`),
      );
    assert.equal(pool.completed, tasks, 'no piscina task for any of the 100 calls');
  });
});

test('a batch goes to the executor with the fewest calls in hand', { timeout: 30_000 }, async () => {
  await withPool(2, async (pool, batcher) => {
    await untilListening(pool, batcher, 2);
    const slow = batch(batcher, ['wait=400', 'wait=400', 'wait=400']);
    await new Promise((r) => setImmediate(r)); // the next turn: another batch
    let slowDone = false;
    void slow.then(() => {
      slowDone = true;
    });
    const fast = await batch(batcher, ['f1', 'f2']);
    assert.equal(slowDone, false, 'the fast calls did not wait behind the slow ones');
    const slowThreads = await slow;
    assert.equal(new Set(slowThreads).size, 1);
    assert.equal(new Set(fast).size, 1);
    assert.notEqual(fast[0], slowThreads[0]);
  });
});

test('the calls in the hands of an executor that dies fail with it; its replacement serves the next', { timeout: 30_000 }, async () => {
  await withPool(1, async (pool, batcher) => {
    await untilListening(pool, batcher, 1);
    const [before] = await batch(batcher, ['x']);
    const doomed = ['wait=300', 'wait=300', 'die'].map((q) => batcher.run(request(q), 'call'));
    for (const call of doomed) await assert.rejects(call, /stopped|exited/);
    // The pool starts another thread; its calls are answered (by piscina tasks until it listens, then on its channel).
    await untilListening(pool, batcher, 1);
    const after = await batch(batcher, ['y', 'z']);
    assert.notEqual(after[0], before);
  });
});

test('channels whose scopes differ only after a NUL do not hear each other (a dispatcher scope holds one)', async () => {
  const [a, b, sameAsA] = [channel('calls', 'home\u0000one'), channel('calls', 'home\u0000two'), channel('calls', 'home\u0000one')];
  const heard: string[] = [];
  b.onmessage = (e: MessageEvent) => heard.push(`b:${e.data}`);
  sameAsA.onmessage = (e: MessageEvent) => heard.push(`a:${e.data}`);
  a.postMessage('x');
  await new Promise((r) => setTimeout(r, 100));
  for (const c of [a, b, sameAsA]) c.close();
  assert.deepEqual(heard, ['a:x']);
});

test('a call that crossed without its address and needs it is sent again with it; its promise settles with that answer', { timeout: 30_000 }, async () => {
  const asked: string[] = [];
  let idle = 0;
  let batcher!: CallBatcher;
  const hooks: Partial<BatcherHooks> = {
    addressNeeded: (req, task) => {
      asked.push(req.requestId);
      return batcher.run(req, task, req.ip);
    },
    idle: () => idle++,
  };
  await withPool(
    1,
    async (pool, b) => {
      batcher = b;
      for (const listening of [false, true]) {
        if (listening) await untilListening(pool, b, 1); // as a piscina task first, then on the calls channel
        asked.length = 0;
        idle = 0;
        const fenced = (n: number) => ({ ...request('address'), requestId: `fenced-${n}`, ip: `10.0.0.${n}` });
        const answers = await Promise.all([
          b.run(fenced(1), 'call', ADDRESS_UNREAD),
          b.run(request('plain'), 'call', ADDRESS_UNREAD),
          b.run(fenced(2), 'call', ADDRESS_UNREAD),
          b.run(fenced(3), 'call'), // crossed with its address: answered at once
        ]);
        assert.deepEqual(
          answers.map((a) => [a.status, a.addressNeeded, JSON.parse(String(a.body)).ip]),
          [
            [200, undefined, '10.0.0.1'],
            [200, undefined, undefined],
            [200, undefined, '10.0.0.2'],
            [200, undefined, '10.0.0.3'],
          ],
          `listening: ${listening}`,
        );
        assert.deepEqual(asked.sort(), ['fenced-1', 'fenced-2'], `listening: ${listening}`);
        // Nothing left in hand, and the dispatcher told so once: not when the two were answered the first time.
        assert.equal(b.pending, 0);
        assert.equal(idle, 1, `listening: ${listening}`);
      }
    },
    hooks,
  );
});

test("without a dispatcher's hook, a call that needs its address is sent again with the request's own", { timeout: 30_000 }, async () => {
  await withPool(1, async (_pool, batcher) => {
    const a = await batcher.run({ ...request('address'), ip: '192.0.2.7' }, 'call', ADDRESS_UNREAD);
    assert.equal(JSON.parse(String(a.body)).ip, '192.0.2.7');
    assert.equal(batcher.pending, 0);
  });
});
