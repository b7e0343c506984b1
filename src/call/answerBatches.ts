// In charge of an executor's side of batched calls (http/callBatches.ts): runs every call of a
// CallBatch at once. On the executor's own calls channel (once it listens), the answers go back on its
// own answers channel a turn of the event loop at a time, so calls finishing together cross back in one
// message and none waits for a slower one. As a piscina task (before the acceptor has heard that it
// listens), the batch's answers are the task's result.
// Every channel here has two ends, this executor and the acceptor: a BroadcastChannel delivers each
// message to every other instance of its name in the process, listening or not, so one answers channel
// shared by N executors had each answer batch cloned into N - 1 executors that only threw it away.
import { threadId } from 'node:worker_threads';
import { type AnswerBatch, CALL_SLOTS, type CallBatch, type CallTask, callIdAt, callRequestAt, callTaskAt, packAnswer } from '../contract/crossing.js';
import { type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import { channel, type ExecutorHello } from '../contract/messages.js';
import { logger } from '../log.js';

export type RunOne = (task: CallTask, req: Request) => Promise<Answer>;

/** The answer to a call whose run threw: runCall answers every failure itself, so this is a bug, answered as the acceptor answers one. */
function failed(req: Request, e: unknown): Answer {
  logger('call').error({ request_id: req.requestId, key: '-', route: req.url, err: e }, 'internal error');
  return errorAnswer('internal_error', 'An error occurred', req.requestId);
}

async function answerOf(run: RunOne, batch: CallBatch, at: number): Promise<Answer> {
  const req = callRequestAt(batch, at);
  try {
    return await run(callTaskAt(batch, at), req);
  } catch (e) {
    return failed(req, e);
  }
}

/** The executor's `batch` piscina task: every call of the batch run at once, their answers its result. */
export function batchTask(run: RunOne): (batch: CallBatch) => Promise<AnswerBatch> {
  return async (batch) => {
    const calls: Promise<Answer>[] = [];
    for (let at = 0; at < batch.length; at += CALL_SLOTS) calls.push(answerOf(run, batch, at));
    const answers = await Promise.all(calls);
    const out: AnswerBatch = [];
    for (let i = 0; i < answers.length; i++) packAnswer(out, callIdAt(batch, i * CALL_SLOTS), answers[i]);
    return out;
  };
}

/**
 * Takes batches straight from the acceptor (http/callBatches.ts) on this executor's own calls channel, not as piscina
 * tasks: a piscina task is a message each way (the task, then its completion) and piscina's own work on both threads;
 * the calls channel is one message in, the answers going back on this executor's answers channel (bench/handoff.ts).
 * Says so on the executors channel now and whenever the acceptor asks, so the acceptor sends none before this listens
 * (and opens its end of the answers channel before it sends the first). Returns what stops it listening.
 */
export function listenForBatches(run: RunOne, scope: string): () => void {
  const own = `${scope}:${threadId}`;
  const calls = channel('calls', own);
  const out = channel('answers', own);
  let answers: AnswerBatch = [];
  const post = () => {
    const message = answers;
    answers = [];
    out.postMessage(message);
  };
  // answerOf's work, written out: on the hot path a promise fewer a call.
  const one = async (batch: CallBatch, at: number): Promise<void> => {
    const id = callIdAt(batch, at);
    const req = callRequestAt(batch, at);
    let a: Answer;
    try {
      a = await run(callTaskAt(batch, at), req);
    } catch (e) {
      a = failed(req, e);
    }
    if (answers.length === 0) setImmediate(post);
    packAnswer(answers, id, a);
  };
  calls.onmessage = (e: MessageEvent) => {
    const batch = e.data as CallBatch;
    for (let at = 0; at < batch.length; at += CALL_SLOTS) void one(batch, at);
  };
  const hello = channel('executors', scope);
  hello.onmessage = (e: MessageEvent) => {
    if ((e.data as ExecutorHello).threadId === null) hello.postMessage({ threadId } satisfies ExecutorHello);
  };
  hello.postMessage({ threadId } satisfies ExecutorHello);
  return () => {
    for (const c of [calls, out, hello]) c.close();
  };
}
