// NOT A PRODUCT: the executor side of bench/handoff.ts: answers a request-shaped task with an
// answer-shaped value at once, one by one (the default task), or a batch at a time through the
// gateway's own call/answerBatches.ts: as piscina tasks only, or (`listen`) on its calls channel once it
// says it listens, as an executor does.
import { workerData } from 'node:worker_threads';
import { batchTask, listenForBatches } from '../src/call/answerBatches.js';
import type { Answer, Request } from '../src/contract/exchange.js';

const answer = (req: Request): Answer => ({
  status: 200,
  headers: ['Content-Type', 'application/json', 'X-Page', '1', 'X-Page-Size', '1000', 'X-Has-More', 'false'],
  body: `[{"aid":${req.query.slice(4)},"bid":1,"abalance":0}]`,
  key: 'p',
});

export default function one(req: Request): Answer {
  return answer(req);
}

const { scope, listen } = workerData as { scope: string; listen: boolean };
const runOne = (_task: unknown, req: Request) => Promise.resolve(answer(req));
export const batch = batchTask(runOne);
if (listen) listenForBatches(runOne, scope);
