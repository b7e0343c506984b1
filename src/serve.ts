// In charge of the server's life: open and migrate the store, load the examples when asked, start
// the recorder thread and the executors, listen, and on SIGTERM/SIGINT stop accepting, finish the
// calls in flight, flush the recorder and exit 0.
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import uWS from 'uWebSockets.js';
import type { ControlContext } from './api/routes.js';
import type { Config } from './config.js';
import { loadExamples } from './examples/load.js';
import { buildApp } from './http/app.js';
import { createDispatcher, type Dispatcher } from './http/dispatch.js';
import { channel } from './call/messages.js';
import type { RecorderRequest, RecorderSettings } from './recorder/recorder.js';
import { createLimiterMemory, RateLimits } from './auth/rateLimit.js';
import { startChangeFeed } from './store/changes.js';
import { processMetrics } from './metrics/metrics.js';
import { EventLog, type EventRow } from './store/events.js';
import { EventHub } from './http/events.js';
import { openStore } from './store/store.js';

const RECORDER = fileURLToPath(new URL('../workers/recorder.js', import.meta.url));

export interface RunningServer {
  port: number;
  stop(): Promise<void>;
}

export async function startServer(config: Config, log: (line: string) => void = console.log): Promise<RunningServer> {
  const store = await openStore(config);
  await store.secret('mask'); // executors read it; created once per store
  if (config.loadExamples) {
    const loaded = await loadExamples(store, config.home);
    for (const k of loaded.createdKeys) {
      log(`Example key ${k.name} (shown once): ${k.secret}  queries: ${k.queries.join(', ')}`);
    }
  }

  const events = await EventLog.open(store.db, { retentionS: config.eventRetention });
  const hub = new EventHub((after, limit) => events.read({ after, limit }));
  const recorder = await startRecorder(config, (rows) => hub.publish(rows));
  // Rate-limit buckets live in shared memory, so every thread of the process counts in the same ones.
  const limiterMemory = createLimiterMemory();
  const limits = new RateLimits({ memory: limiterMemory, redisUrl: config.redisUrl, serverRate: config.rateLimit });
  await limits.ready();
  const dispatcher = countInFlight(createDispatcher(config, limiterMemory));
  const changes = await startChangeFeed(channel('changes', config.home), config);
  const control: ControlContext = {
    config,
    store,
    adminKey: config.adminKey ? Buffer.from(config.adminKey, 'utf8') : null,
    publishChange: (m) => changes.publish(m),
    flushHistory: () => recorder.request('flush').then(() => undefined),
    events,
    hub,
  };
  const state = { draining: false };
    // Every executor (or the inline one) and the recorder answer each scrape.
  const metrics = processMetrics(Math.max(1, config.workers) + 1, config.home);
  metrics.metrics.rateLimitFallbacks.reset();
  const fallbacks = metrics.metrics.rateLimitFallbacks;
  (fallbacks as unknown as { collect?: () => void }).collect = () => {
    fallbacks.reset();
    fallbacks.inc(limits.fallbacks); // one process-wide count, kept in the shared buckets
  };
  const app = buildApp(control, dispatcher, limits, metrics, state);

  const { token, port } = await new Promise<{ token: uWS.us_listen_socket; port: number }>((resolve, reject) => {
    app.listen(config.host, config.port, (t) => {
      if (t) resolve({ token: t, port: uWS.us_socket_local_port(t) });
      else reject(new Error(`Could not listen on ${config.host}:${config.port} (is the port taken?)`));
    });
  });

  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      state.draining = true;
      uWS.us_listen_socket_close(token);
      hub.close();
      await dispatcher.idle();
      const drain = channel('drain', config.home);
      drain.postMessage('drain'); // every executor posts its last batch, marked final
      drain.close();
      await recorder.request('stop', Math.max(1, config.workers));
      await dispatcher.close();
      await recorder.worker.terminate();
      await changes.close();
      await limits.close();
      metrics.close();
      await store.close();
      (app as unknown as { close(): void }).close(); // closes kept-alive sockets too
    })());
  return { port, stop };
}

/** Wraps the dispatcher so shutdown can wait for the calls in flight. */
function countInFlight(d: Dispatcher): Dispatcher & { idle(): Promise<void> } {
  let inFlight = 0;
  let waiters: Array<() => void> = [];
  const settle = () => {
    if (--inFlight === 0) {
      for (const w of waiters) w();
      waiters = [];
    }
  };
  return {
    run(task, transfer) {
      inFlight++;
      const p = d.run(task, transfer);
      p.then(settle, settle);
      return p;
    },
    get refused() {
      return d.refused;
    },
    close: () => d.close(),
    idle: () => (inFlight === 0 ? Promise.resolve() : new Promise<void>((r) => waiters.push(r))),
  };
}

async function startRecorder(config: Config, onEvents: (rows: EventRow[]) => void) {
  const settings: RecorderSettings = {
    home: config.home, databaseUrl: config.databaseUrl, historyLimit: config.historyLimit, eventRetention: config.eventRetention,
    historyFlushInterval: config.historyFlushInterval, historyMaxPending: config.historyMaxPending,
  };
  const worker = new Worker(RECORDER, { workerData: settings });
  let next = 0;
  const pending = new Map<number, (v: unknown) => void>();
  worker.on('message', (m: { id: number; events?: EventRow[] }) => {
    if (m.events) return onEvents(m.events);
    pending.get(m.id)?.(m);
    pending.delete(m.id);
  });
  worker.on('error', (e) => console.error('recorder thread failed:', e));
  await new Promise<void>((resolve, reject) => {
    pending.set(0, () => resolve());
    worker.once('error', reject);
  });
  return {
    worker,
    request(op: RecorderRequest['op'], executors?: number): Promise<unknown> {
      const id = ++next;
      return new Promise((resolve) => {
        pending.set(id, resolve);
        worker.postMessage({ id, op, executors });
      });
    },
  };
}
