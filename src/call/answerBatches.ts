// In charge of an executor's side of batched calls (http/callBatches.ts): runs every call of a
// CallBatch at once and posts the answers on the `answers` channel a turn of the event loop at a
// time, so calls finishing together cross back in one message, and none waits for a slower one.
import { threadId } from 'node:worker_threads';
import { type AnswerBatch, CALL_SLOTS, type CallBatch, type CallTask, callIdAt, callRequestAt, callTaskAt, packAnswer } from '../contract/crossing.js';
import { type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import { channel, type ExecutorHello } from '../contract/messages.js';
import { logger } from '../log.js';

/** The executor's `batch` task for a dispatcher whose answers channel is `scope`; `run` makes each call's answer. */
export function batchRunner(run: (task: CallTask, req: Request) => Promise<Answer>, scope: string): (batch: CallBatch) => Promise<void> {
  const out = channel('answers', scope);
  let answers: AnswerBatch = [];
  const post = () => {
    const message = answers;
    answers = [];
    out.postMessage(message);
  };
  const answer = (id: number, a: Answer) => {
    if (answers.length === 0) setImmediate(post);
    packAnswer(answers, id, a);
  };
  const one = async (id: number, task: CallTask, req: Request): Promise<void> => {
    let a: Answer;
    try {
      a = await run(task, req);
    } catch (e) {
      // runCall answers every failure itself; this is a bug, answered as the acceptor answers one.
      logger('call').error({ request_id: req.requestId, key: '-', route: req.url, err: e }, 'internal error');
      a = errorAnswer('internal_error', 'An error occurred', req.requestId);
    }
    answer(id, a);
  };
  // A batch that came as a piscina task ends (piscina posts its completion) as soon as its calls are done,
  // before their answers leave: piscina then knows this executor is free by the time a caller who got an
  // answer calls again. Ending it after the post saved 1-3% of a pooled call's CPU, but sent a caller's next
  // call to another executor, whose runs reach the recorder later (bench/results/levers-2026-12-03-crossing).
  // On the calls channel the acceptor counts the executor free as the answers arrive (http/callBatches.ts).
  return async (batch) => {
    const calls: Promise<void>[] = [];
    for (let at = 0; at < batch.length; at += CALL_SLOTS) calls.push(one(callIdAt(batch, at), callTaskAt(batch, at), callRequestAt(batch, at)));
    await Promise.all(calls);
  };
}

/**
 * Takes batches straight from the acceptor (http/callBatches.ts) on this executor's own calls channel, not as piscina
 * tasks: a piscina task is a message each way (the task, then its completion) and piscina's own work on both threads;
 * the calls channel is one message in, the answers going back on theirs (bench/handoff.ts). Says so on the executors
 * channel now and whenever the acceptor asks, so the acceptor sends none before this listens.
 */
export function listenForBatches(run: (batch: CallBatch) => Promise<void>, scope: string): void {
  const calls = channel('calls', `${scope}:${threadId}`);
  calls.onmessage = (e: MessageEvent) => void run(e.data as CallBatch);
  const hello = channel('executors', scope);
  hello.onmessage = (e: MessageEvent) => {
    if ((e.data as ExecutorHello).threadId === null) hello.postMessage({ threadId } satisfies ExecutorHello);
  };
  hello.postMessage({ threadId } satisfies ExecutorHello);
}
