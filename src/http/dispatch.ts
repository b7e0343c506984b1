// In charge of handing /q/ and /execute_sql calls (and catalog builds, MCP requests) to the executors: a piscina pool tuned for
// I/O-bound tasks, or the same modules inline when QUERYAPIGATE_WORKERS=0. A full queue answers 503 at
// once (counted), and shutdown can wait for the tasks in flight.
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type * as PiscinaModule from 'piscina';
import { type CallContext, createCallContext, type ExecutorData } from '../call/context.js';
import { runAdhoc } from '../call/adhoc.js';
import { runCall } from '../call/runCall.js';
import { buildCatalog, type CatalogDocuments, type CatalogTask } from '../catalog/build.js';
import type { McpTask, McpToolListing, McpToolsTask } from '../mcp/server.js';
import type { Config } from '../config.js';
import type { HostInExecutor } from '../recorder/client.js';
import type { RecordTask } from '../recorder/host.js';
import type { CallTask } from '../contract/crossing.js';
import { GatewayError } from '../contract/errors.js';
import { ADDRESS_UNREAD, type Answer, type Request } from '../contract/exchange.js';
import { logger } from '../log.js';
import { busyAnswer, type CallBatcher, createCallBatcher } from './callBatches.js';
import { plainRequest } from './respond.js';

export interface Dispatcher {
  /** `transfer` moves a stream's port to the executor (inline mode keeps it in this thread). */
  run(req: Request, transfer?: Transferable[], task?: CallTask): Promise<Answer>;
  /** Builds a caller's catalog in an executor (its plan and schema caches); a full queue is GatewayError 'unavailable'. */
  catalog(task: CatalogTask): Promise<CatalogDocuments>;
  /** Answers one MCP request in an executor (stateless: any executor can). */
  mcp(task: McpTask): Promise<Answer>;
  /** The MCP tools an administrator sees, for GET /api/v1/mcp/tools. */
  mcpTools(task: McpToolsTask): Promise<McpToolListing>;
  /**
   * Runs the recorder in an executor until it is stopped (recorder/client.ts HostInExecutor); with executors only.
   * Not a call: neither counted in flight nor refused by a full queue.
   */
  hostRecorder: HostInExecutor;
  /** Calls refused because the queue was full. */
  readonly refused: number;
  /** Resolves when no call is in flight. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/** MCP's module (and the SDK) loaded on the first MCP request: about 14 MB of RSS a thread need not hold otherwise. */
const mcpModule = () => import('../mcp/server.js');

/** The executor's tasks besides calls, by the name the worker file exports each under. */
const TASKS = {
  catalog: buildCatalog,
  mcp: async (ctx: CallContext, task: McpTask): Promise<Answer> => (await mcpModule()).serveMcp(ctx, task),
  mcpTools: async (ctx: CallContext, task: McpToolsTask): Promise<McpToolListing> => (await mcpModule()).mcpTools(ctx, task),
};
type TaskName = keyof typeof TASKS;
type Named = <N extends TaskName>(name: N, task: Parameters<(typeof TASKS)[N]>[1]) => ReturnType<(typeof TASKS)[N]>;

/** Callers remembered as needing their address (http/dispatch.ts `wantAddress`). */
const WANT_ADDRESS_MAX = 10_000;

const EXECUTOR = fileURLToPath(new URL('../../workers/executor.js', import.meta.url));
/**
 * An executor's young generation, in MB: V8 makes its two semi-spaces a third of it each (8 MB; 16 by
 * default). Under steady load V8 grows them to their maximum whatever the calls keep, and a call's objects
 * die within milliseconds, well before either fills: at 32 callers this cut an executor's RSS by 16 MiB
 * with calls per CPU-s the same or better (bench/results/levers-2026-12-03-young), and a 5,000,000-row CSV
 * export's peak RSS over the idle process from 34-40 to 12-16 MB (streams-2026-12-03-young-after). A
 * --max-semi-space-size given to node itself wins.
 */
const EXECUTOR_YOUNG_GENERATION_MB = 24;
/** piscina, required only with executors: inline (QUERYAPIGATE_WORKERS=0) its ~1 MB would sit in the heap unused. */
const requireCjs = createRequire(import.meta.url);

/**
 * `changesPosted`: how many changes the acceptor has posted to the executors; every request that
 * crosses carries it (Request.changes), so an executor that has not heard of them yet catches up first.
 */
export function createDispatcher(config: Config, limiterMemory: SharedArrayBuffer, changesPosted: () => number = () => 0): Dispatcher {
  let run: (req: Request, transfer?: Transferable[], task?: CallTask) => Promise<Answer>;
  let named: Named;
  let close: () => Promise<void>;
  let refused = 0;
  let batches: CallBatcher | null = null;
  let hostRecorder: HostInExecutor = () => Promise.reject(new Error('no executors to hold the recorder (QUERYAPIGATE_WORKERS=0)'));
  // Calls in flight, for shutdown: counted here, and the batched ones by their batcher (no promise of their own for it).
  let inFlight = 0;
  let idleWaiters: Array<() => void> = [];
  const isIdle = () => inFlight === 0 && (batches === null || batches.pending === 0);
  const wake = () => {
    if (!isIdle()) return;
    for (const w of idleWaiters) w();
    idleWaiters = [];
  };
  const settle = () => {
    inFlight--;
    wake();
  };
  const counted = <T>(p: Promise<T>): Promise<T> => {
    inFlight++;
    p.then(settle, settle);
    return p;
  };
  if (config.workers === 0) {
    const ctx = createCallContext({ config, limiterMemory, answers: '' });
    run = (req, _transfer, task) => {
      // The change is posted from this thread too, but heard a turn later: a call never runs before it.
      ctx.catchUp(changesPosted());
      return counted(task === 'adhoc' ? runAdhoc(ctx, req) : runCall(ctx, req));
    };
    named = ((name: TaskName, task: never) => TASKS[name](ctx, task)) as Named;
    close = () => ctx.close();
  } else {
    // Call ids are this dispatcher's: its answers channel is its own, even beside another server in the process.
    const answers = `${config.home}\u0000${randomUUID()}`;
    const data: ExecutorData = { config, limiterMemory, answers };
    const { Piscina } = requireCjs('piscina') as typeof PiscinaModule;
    const pool = new Piscina({
      filename: EXECUTOR,
      workerData: data,
      minThreads: config.workers,
      maxThreads: config.workers,
      concurrentTasksPerWorker: config.tasksPerWorker,
      maxQueue: config.maxQueue,
      idleTimeout: 2 ** 31 - 1,
      // An executor blocked in Atomics.wait would miss BroadcastChannel invalidations and pool timers.
      atomics: 'disabled',
      // piscina tries require(filename) before import(); Node 20's require(esm) can half-load our ESM
      // executor and then trip an internal assertion on the import. Make the require fail cleanly.
      execArgv: workerExecArgv(['--no-experimental-require-module']),
      resourceLimits: { maxYoungGenerationSizeMb: EXECUTOR_YOUNG_GENERATION_MB },
    });
    // A thread that fails with no piscina task in hand (its batches come on its calls channel) is reported here;
    // piscina replaces it, and the calls it had fail with it (callBatches.ts). Unheard, the event would end the process.
    pool.on('error', (err: unknown) => logger('executor').error({ err }, 'an executor thread failed'));
    /**
     * Callers (keys, tokens) whose calls needed their address: theirs cross with it read. Bounded;
     * forgetting one costs its next call a second crossing.
     */
    const wantAddress = new Set<string>();
    const callerOf = (req: Request): string => req.apiKey || (req.authorization ?? '');
    // A call that crossed without its address, answered that a rule needs it, is sent again with it by the batcher.
    // Handled there rather than in a `then` of every call's answer, as is counting it in flight: the two promises a
    // call had for them cost the pooled gateway about 4% of its calls per CPU-s, the median of 10 rounds
    // (bench/results/levers-2026-12-06-pooled-promises, -2).
    const batcher = createCallBatcher(
      pool,
      answers,
      { running: config.workers * config.tasksPerWorker, queue: config.maxQueue },
      {
        addressNeeded: (req, task) => {
          if (wantAddress.size >= WANT_ADDRESS_MAX) wantAddress.clear();
          wantAddress.add(callerOf(req));
          return batcher.run(req, task, req.ip, changesPosted());
        },
        idle: wake,
      },
    );
    batches = batcher;
    run = (req, transfer, task) => {
      if (!transfer) {
        // An executor gets the request as plain data (packed from it as it is, no copy), its address read only for a
        // caller whose rules need it.
        const t = task ?? 'call';
        return batcher.run(req, t, wantAddress.has(callerOf(req)) ? req.ip : ADDRESS_UNREAD, changesPosted());
      }
      // A stream's call carries its port, so it crosses alone. queueSize counts the calls waiting
      // beyond every executor's concurrent tasks, as maxQueue does.
      if (pool.queueSize >= config.maxQueue) {
        refused++;
        return Promise.resolve(busyAnswer(req.requestId));
      }
      const name = task === 'adhoc' ? 'adhoc' : undefined;
      return counted(pool.run(plainRequest(req, changesPosted()), { name, transferList: transfer as never }) as Promise<Answer>);
    };
    named = ((name: TaskName, task: unknown) => {
      if (pool.queueSize >= config.maxQueue) {
        refused++;
        return Promise.reject(new GatewayError('unavailable', 'The server is busy; try again shortly', { retry_after: 1 }));
      }
      return pool.run(task, { name });
    }) as Named;
    hostRecorder = (port, data) => pool.run({ port, data } satisfies RecordTask, { name: 'record', transferList: [port] as never }) as Promise<void>;
    close = async () => {
      await pool.close();
      batcher.close();
    };
  }

  return {
    run,
    catalog: (task) => counted(named('catalog', task)),
    mcp: (task) => counted(named('mcp', { ...task, request: plainRequest(task.request, changesPosted()) })),
    mcpTools: (task) => counted(named('mcpTools', task)),
    hostRecorder: (port, data) => hostRecorder(port, data),
    get refused() {
      return refused + (batches?.refused ?? 0);
    },
    idle: () => (isIdle() ? Promise.resolve() : new Promise<void>((r) => idleWaiters.push(r))),
    close: () => close(),
  };
}

/**
 * Node's own command-line flags for a Worker, with `extra`: the parent's, less those a Worker refuses.
 * A Worker given execArgv refuses V8's flags (`--max-old-space-size=512`: "Initiated Worker with
 * invalid execArgv flags"), which are the whole process's already; a server started as `node
 * --max-old-space-size=512 dist/src/main.js serve` did not start with executor threads. Node names
 * the flags it refuses only in its error's message, so a probe Worker is asked (and stopped at once).
 */
export function workerExecArgv(extra: string[]): string[] {
  let flags = [...process.execArgv];
  while (flags.length) {
    try {
      void new Worker('', { eval: true, execArgv: [...flags, ...extra] }).terminate();
      break;
    } catch (e) {
      if ((e as { code?: string }).code !== 'ERR_WORKER_INVALID_EXEC_ARGV') throw e;
      const refused = new Set((e as Error).message.slice((e as Error).message.indexOf(': ') + 2).split(', '));
      const kept = flags.filter((f) => !refused.has(f));
      flags = kept.length < flags.length ? kept : []; // a message not understood: none of the parent's
    }
  }
  return [...flags, ...extra];
}
