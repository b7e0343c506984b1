// The piscina worker entry: builds this thread's CallContext once and serves calls with runCall.
// All the work lives in src/call; this file only wires it up.
import { workerData } from 'node:worker_threads';
import { createCallContext, type ExecutorData } from '../src/call/context.js';
import { runCall } from '../src/call/runCall.js';
import type { Answer, Request } from '../src/contract/exchange.js';

const ctx = createCallContext(workerData as ExecutorData);

export default function execute(req: Request): Promise<Answer> {
  return runCall(ctx, req);
}
