// The piscina worker entry: builds this thread's CallContext once and serves calls with runCall.
// All the work lives in src/call; this file only wires it up.
import { workerData } from 'node:worker_threads';
import type { CallTask, CallAnswer } from '../src/call/messages.js';
import { createCallContext } from '../src/call/context.js';
import { runCall } from '../src/call/runCall.js';
import type { ExecutorData } from '../src/http/dispatch.js';

const { config, limiterMemory } = workerData as ExecutorData;
const ctx = createCallContext(config, limiterMemory);

export default function execute(task: CallTask): Promise<CallAnswer> {
  return runCall(ctx, task);
}
