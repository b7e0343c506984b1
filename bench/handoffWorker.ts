// NOT A PRODUCT: the executor side of bench/handoff.ts: answers a request-shaped task with an
// answer-shaped value at once, one by one (the default task) or a batch at a time on a channel.
import { BroadcastChannel } from 'node:worker_threads';
import type { Answer, AnswerBatch, CallBatch, Request } from '../src/contract/exchange.js';

const out = new BroadcastChannel('qag-bench-handoff');
let ids: number[] = [];
let answers: Answer[] = [];

const answer = (req: Request): Answer => ({
  status: 200,
  headers: ['Content-Type', 'application/json', 'X-Page', '1', 'X-Page-Size', '1000', 'X-Has-More', 'false'],
  body: `[{"aid":${req.query.slice(4)},"bid":1,"abalance":0}]`,
  key: 'p',
});

export default function one(req: Request): Answer {
  return answer(req);
}

export function batch({ calls }: CallBatch): null {
  if (ids.length === 0) {
    setImmediate(() => {
      const m: AnswerBatch = { ids, answers };
      ids = [];
      answers = [];
      out.postMessage(m);
    });
  }
  for (const c of calls) {
    ids.push(c.id);
    answers.push(answer(c.req));
  }
  return null;
}
