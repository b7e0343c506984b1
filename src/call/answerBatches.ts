// In charge of an executor's side of batched calls (http/callBatches.ts): runs every call of a
// CallBatch at once and posts the answers on the `answers` channel a turn of the event loop at a
// time, so calls finishing together cross back in one message, and none waits for a slower one.
import { type AnswerBatch, CALL_SLOTS, type CallBatch, type CallTask, callIdAt, callRequestAt, callTaskAt, packAnswer } from '../contract/crossing.js';
import { type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import { channel } from '../contract/messages.js';
import { logger } from '../log.js';

/** The executor's `batch` task for a dispatcher whose answers channel is `scope`; `run` makes each call's answer. */
export function batchRunner(run: (task: CallTask, req: Request) => Promise<Answer>, scope: string): (batch: CallBatch) => Promise<void> {
  const out = channel('answers', scope);
  let answers: AnswerBatch = [];
  /** Settles once the answers queued so far are posted. */
  let posted: Promise<void> = Promise.resolve();
  let markPosted = () => {};
  const post = () => {
    const message = answers;
    answers = [];
    out.postMessage(message);
    markPosted();
  };
  const answer = (id: number, a: Answer) => {
    if (answers.length === 0) {
      setImmediate(post);
      posted = new Promise((resolve) => {
        markPosted = resolve;
      });
    }
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
  // The batch ends (and piscina posts its completion) only after its last answer is posted: both
  // messages then leave in the same turn and wake the acceptor once, not twice.
  return async (batch) => {
    const calls: Promise<void>[] = [];
    for (let at = 0; at < batch.length; at += CALL_SLOTS) calls.push(one(callIdAt(batch, at), callTaskAt(batch, at), callRequestAt(batch, at)));
    await Promise.all(calls);
    await posted;
  };
}
