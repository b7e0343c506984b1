// Executor for the call batch tests (callBatches.test.ts), run by piscina: answers each call with its
// query and the thread that answered; `wait=<ms>` answers after that long, `die` ends the thread, `address` answers
// with the caller's address, or that a rule needs it when the call crossed without it.
// Inert when loaded as the main thread (the test runner loads every file under test/).
import { isMainThread, threadId, workerData } from 'node:worker_threads';
import { batchTask, listenForBatches } from '../../src/call/answerBatches.js';
import { ADDRESS_UNREAD, type Answer, type Request } from '../../src/contract/exchange.js';

async function answer(req: Request): Promise<Answer> {
  if (req.query === 'die') process.exit(1); // in a worker: ends this thread only
  const wait = /^wait=(\d+)$/.exec(req.query);
  if (wait) await new Promise((r) => setTimeout(r, Number(wait[1])));
  if (req.query === 'address') {
    if (req.ip === ADDRESS_UNREAD) return { status: 200, headers: [], body: '', addressNeeded: true };
    return { status: 200, headers: [], body: JSON.stringify({ query: req.query, thread: threadId, ip: req.ip }) };
  }
  return { status: 200, headers: [], body: JSON.stringify({ query: req.query, thread: threadId }) };
}

// Only in piscina's threads: the test runner loads this file too, as its main thread, with no scope.
export const batch = isMainThread ? null : batchTask((_task, req) => answer(req));
if (!isMainThread) listenForBatches((_task, req) => answer(req), workerData as string);
