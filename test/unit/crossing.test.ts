// Tests for calls and answers as they cross between the acceptor and an executor: packed flat
// (contract/crossing.ts) and read back to the same request and answer after a structured clone, and
// an executor's batch (call/answerBatches.ts) answered call by call: in one message on its own answers
// channel, or as a piscina task's result.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { threadId } from 'node:worker_threads';
import { batchTask, listenForBatches } from '../../src/call/answerBatches.js';
import {
  ANSWER_SLOTS,
  type AnswerBatch,
  answerAt,
  answerIdAt,
  CALL_SLOTS,
  type CallBatch,
  callIdAt,
  callRequestAt,
  callTaskAt,
  packAnswer,
  packCall,
} from '../../src/contract/crossing.js';
import type { Answer, Request } from '../../src/contract/exchange.js';
import { channel } from '../../src/contract/messages.js';

// Every field a batched request has (typed so that a field added to Request must be added here too).
const full: Required<Omit<Request, 'port'>> = {
  method: 'POST',
  url: '/execute_sql',
  query: 'a=1&b=%20',
  requestId: 'req-1',
  apiKey: 'sk_secret',
  authorization: 'Bearer t.o.k',
  ifNoneMatch: '"etag"',
  lastEventId: '42',
  ip: '10.0.0.7',
  body: new Uint8Array([123, 125]),
  started: 1234.5,
  headers: { accept: 'application/json', 'mcp-protocol-version': '2025-06-18' },
  changes: 9,
};
const bare: Request = {
  method: 'GET',
  url: '/q/account',
  query: 'aid=7',
  requestId: 'req-2',
  apiKey: '',
  ifNoneMatch: '',
  lastEventId: '',
  ip: 'unread',
  body: null,
  started: 1,
};

test('calls packed in one batch read back as the same requests, ids and tasks, after a structured clone', () => {
  const batch: CallBatch = [];
  packCall(batch, 7, 'adhoc', full);
  packCall(batch, 8, 'call', bare);
  assert.equal(batch.length, 2 * CALL_SLOTS);
  const crossed = structuredClone(batch);
  assert.equal(callIdAt(crossed, 0), 7);
  assert.equal(callTaskAt(crossed, 0), 'adhoc');
  assert.deepEqual(callRequestAt(crossed, 0), full);
  assert.equal(callIdAt(crossed, CALL_SLOTS), 8);
  assert.equal(callTaskAt(crossed, CALL_SLOTS), 'call');
  const second = callRequestAt(crossed, CALL_SLOTS);
  for (const [name, value] of Object.entries(bare)) assert.deepEqual(second[name as keyof Request], value, name);
  assert.equal(second.authorization, undefined);
  assert.equal(second.headers, undefined);
  assert.equal(second.changes, undefined);
});

test('answers packed in one batch read back as the same answers, after a structured clone', () => {
  const every: Required<Answer> = { status: 200, headers: ['X-Page', '1'], body: new Uint8Array([1, 2]), key: 'reader', streamed: false, addressNeeded: true };
  const plain: Answer = { status: 404, headers: ['Content-Type', 'application/json'], body: '{"code":"not_found"}' };
  const batch: AnswerBatch = [];
  packAnswer(batch, 3, every);
  packAnswer(batch, 4, plain);
  assert.equal(batch.length, 2 * ANSWER_SLOTS);
  const crossed = structuredClone(batch);
  assert.equal(answerIdAt(crossed, 0), 3);
  assert.deepEqual(answerAt(crossed, 0), every);
  assert.equal(answerIdAt(crossed, ANSWER_SLOTS), 4);
  const second = answerAt(crossed, ANSWER_SLOTS);
  assert.equal(second.status, 404);
  assert.deepEqual(second.headers, plain.headers);
  assert.equal(second.body, plain.body);
  assert.equal(second.key, undefined);
  assert.equal(second.addressNeeded, undefined);
});

const echo = async (task: string, req: Request): Promise<Answer> => ({ status: 200, headers: [], body: `${task}:${req.query}` });

function twoCalls(): CallBatch {
  const batch: CallBatch = [];
  packCall(batch, 1, 'call', { ...bare, query: 'aid=1' });
  packCall(batch, 2, 'adhoc', { ...bare, query: 'aid=2' });
  return batch;
}
const bodies = (got: AnswerBatch) => [answerIdAt(got, 0), answerAt(got, 0).body, answerIdAt(got, ANSWER_SLOTS), answerAt(got, ANSWER_SLOTS).body];

test("an executor's batch on its calls channel: each call answered with its own id, the calls of a turn in one message, on its own answers channel only", async (t) => {
  const scope = `crossing-${process.pid}`;
  const heard: AnswerBatch[] = [];
  const mine = channel('answers', `${scope}:${threadId}`);
  mine.onmessage = (e: MessageEvent) => heard.push(e.data as AnswerBatch);
  // Another executor's answers channel, and the one all executors once shared: neither hears these answers.
  const elsewhere: unknown[] = [];
  const others = [channel('answers', `${scope}:${threadId + 1000}`), channel('answers', scope)];
  for (const o of others) o.onmessage = (e: MessageEvent) => elsewhere.push(e.data);
  const stop = listenForBatches(echo, scope);
  t.after(() => {
    stop();
    for (const c of [mine, ...others]) c.close();
  });
  const acceptor = channel('calls', `${scope}:${threadId}`);
  acceptor.postMessage(twoCalls());
  acceptor.close();
  for (let i = 0; i < 100 && heard.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 50)); // room for a second message, or one elsewhere, to arrive
  assert.equal(heard.length, 1);
  assert.deepEqual(bodies(heard[0]), [1, 'call:aid=1', 2, 'adhoc:aid=2']);
  assert.deepEqual(elsewhere, []);
});

test("an executor's batch as a piscina task: its answers, each with its call's id, are the task's result", async () => {
  assert.deepEqual(bodies(await batchTask(echo)(twoCalls())), [1, 'call:aid=1', 2, 'adhoc:aid=2']);
});
