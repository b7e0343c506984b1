// In charge of handing /q/ calls to the executors: a piscina pool tuned for I/O-bound tasks, or the
// same call module inline when QUERYAPIGATE_WORKERS=0. A full queue answers 503 at once.
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { createCallContext } from '../call/context.js';
import { errorAnswer } from '../call/errors.js';
import type { CallAnswer, CallTask } from '../call/messages.js';
import { runCall } from '../call/runCall.js';
import type { Config } from '../config.js';

/** What each executor thread starts with: the config, and the shared rate-limit buckets. */
export interface ExecutorData {
  config: Config;
  limiterMemory: SharedArrayBuffer;
}

export interface Dispatcher {
  /** `transfer` moves a stream's port to the executor (inline mode keeps it in this thread). */
  run(task: CallTask, transfer?: Transferable[]): Promise<CallAnswer>;
  /** Calls refused because the queue was full. */
  readonly refused: number;
  close(): Promise<void>;
}

const EXECUTOR = fileURLToPath(new URL('../../workers/executor.js', import.meta.url));

export function createDispatcher(config: Config, limiterMemory: SharedArrayBuffer): Dispatcher {
  if (config.workers === 0) {
    const ctx = createCallContext(config, limiterMemory);
    return { run: (task) => runCall(ctx, task), refused: 0, close: () => ctx.close() };
  }
  const pool = new Piscina({
    filename: EXECUTOR,
    workerData: { config, limiterMemory } satisfies ExecutorData,
    minThreads: config.workers,
    maxThreads: config.workers,
    concurrentTasksPerWorker: config.tasksPerWorker,
    maxQueue: config.maxQueue,
    idleTimeout: 2 ** 31 - 1,
    // An executor blocked in Atomics.wait would miss BroadcastChannel invalidations and pool timers.
    atomics: 'disabled',
    // piscina tries require(filename) before import(); Node 20's require(esm) can half-load our ESM
    // executor and then trip an internal assertion on the import. Make the require fail cleanly.
    execArgv: [...process.execArgv, '--no-experimental-require-module'],
  });
  let refused = 0;
  return {
    run(task, transfer) {
      return pool.run(task, transfer ? { transferList: transfer as never } : undefined).catch((e: Error) => {
        if (/queue is at limit/i.test(e.message)) {
          refused++;
          const busy = errorAnswer('unavailable', 'The server is busy; try again shortly', task.requestId, { retry_after: 1 });
          busy.headers.push('Retry-After', '1');
          return busy;
        }
        throw e;
      });
    },
    get refused() {
      return refused;
    },
    async close() {
      await pool.close();
    },
  };
}
