// In charge of an executor's side of batched calls (http/callBatches.ts): runs every call of a
// CallBatch at once and posts the answers on the `answers` channel a turn of the event loop at a
// time, so calls finishing together cross back in one message, and none waits for a slower one.
import { type Answer, type AnswerBatch, type CallBatch, errorAnswer } from '../contract/exchange.js';
import { channel } from '../contract/messages.js';
import { logger } from '../log.js';
import { runAdhoc } from './adhoc.js';
import type { CallContext } from './context.js';
import { runCall } from './runCall.js';

/** The executor's `batch` task for a dispatcher whose answers channel is `scope`. */
export function batchRunner(ctx: CallContext, scope: string): (batch: CallBatch) => Promise<void> {
  const out = channel('answers', scope);
  let ids: number[] = [];
  let answers: Answer[] = [];
  const post = () => {
    const message: AnswerBatch = { ids, answers };
    ids = [];
    answers = [];
    out.postMessage(message);
  };
  const answer = (id: number, a: Answer) => {
    if (ids.length === 0) setImmediate(post);
    ids.push(id);
    answers.push(a);
  };
  const one = async (id: number, task: 'call' | 'adhoc', req: CallBatch['calls'][number]['req']): Promise<void> => {
    let a: Answer;
    try {
      a = await (task === 'adhoc' ? runAdhoc(ctx, req) : runCall(ctx, req));
    } catch (e) {
      // runCall answers every failure itself; this is a bug, answered as the acceptor answers one.
      logger('call').error({ request_id: req.requestId, key: '-', route: req.url, err: e }, 'internal error');
      a = errorAnswer('internal_error', 'An error occurred', req.requestId);
    }
    answer(id, a);
  };
  return async ({ calls }) => {
    await Promise.all(calls.map((c) => one(c.id, c.task, c.req)));
  };
}
