// The composition root of a server: opens the store, starts the recorder, the executors and
// the change feed, builds the acceptor and listens, saying what it did in one line each (the store,
// the examples and where their secrets went, the mode, the executors, the address); on stop, drains
// in order (stop accepting, finish calls in flight, every executor's last batch to the recorder,
// close everything).
import v8 from 'node:v8';
import uWS from 'uWebSockets.js';
import { alertSignals } from './api/signals.js';
import { auditExamplesLoaded } from './api/audited.js';
import { startHeartbeat } from './api/instances.js';
import type { ControlContext } from './api/routes.js';
import { RateLimits } from './auth/rateLimit.js';
import { createLimiterMemory } from './auth/sharedBuckets.js';
import { type Config, ConfigError } from './config.js';
import { type ChangeMessage, channel, type DrainMessage } from './contract/messages.js';
import { CatalogCache } from './catalog/cache.js';
import { createCacheAdmin } from './call/resultCache.js';
import { loadExamples } from './examples/load.js';
import { buildApp, VERSION } from './http/app.js';
import { createDispatcher } from './http/dispatch.js';
import { EventHub } from './http/events.js';
import { processMetrics } from './metrics/metrics.js';
import { startRecorder } from './recorder/client.js';
import type { RecorderPlace } from './recorder/recorder.js';
import { batchScheduling } from './scheduling.js';
import { configureLogs, droppedLogLines, logger, SERVER_LOG_FD } from './log.js';
import { type ChangeFeed, startChangeFeed } from './store/changes.js';
import { describeStore } from './store/describe.js';
import { EventLog } from './store/events.js';
import { createMetadata } from './store/metadata.js';
import { JwtAuth, jwtEnabled } from './auth/jwt.js';
import { openStore, type Store } from './store/store.js';

/** uWS's LIBUS_LISTEN_EXCLUSIVE_PORT: no SO_REUSEPORT. */
const LISTEN_EXCLUSIVE_PORT = 1;

export interface RunningServer {
  port: number;
  /** The example keys this start created, with their secrets (logged once, never stored). */
  exampleKeys: Array<{ name: string; secret: string }>;
  stop(): Promise<void>;
}

/** The example key the start-up lines and the README name. */
const EXAMPLE_KEY = 'example-partner';

/**
 * How far V8 lets the old generation grow past what the last full collection kept before the next one,
 * in percent. By default it may reach up to 4x: on the lookup at 32 callers the acceptor's old
 * generation stood at 51-61 MB over a live heap of 17, most of the RSS above the floor's. At 60 the RSS
 * after load was 22 MiB lower; its CPU cost was within the noise (bench/results/gcwindows-2026-12-03-growth).
 * Process-wide: executors and the recorder too. V8 reads it at each collection, so setting it here
 * works; a --heap-growing-percent given to node itself wins.
 */
const HEAP_GROWING_PERCENT = 60;

/**
 * The flags the start commands give node (package.json's start, the Dockerfile; not the bin, see main.ts). V8 takes
 * both only at start-up: set in a running process the first aborts it, the second changes nothing.
 *
 * GC_FLAG: V8 collects each heap on its own thread, with no helper threads. On 2 cores a pooled gateway's threads fill
 * them already, and V8's concurrent marking competed with them: with the flag, calls per CPU-s +3-4% and the p99 at 32
 * callers lower in every round; inline the same CPU, its p99 as often lower as not, RSS 8-10 MiB higher
 * (bench/results/levers-2026-12-05-stgc-*).
 *
 * YOUNG_FLAG: the main thread's young generation held to 24 MB, as an executor's is (http/dispatch.ts
 * EXECUTOR_YOUNG_GENERATION_MB: a call's objects die long before 8 MB semi-spaces fill, and V8 grows them to 16 under
 * any steady load). Inline at 32 callers, the RSS after load 8-20 MiB lower at the medians, the calls per CPU-s the same
 * within the noise (medians 1.03x over 9 rounds on stop 74's machine, 0.98x over 8 on stop 71's; side by side 1.00x and
 * 1.02x, the two orders: modes-stop74-semi8-first, -semi16-first); pooled, 2-12 MiB lower
 * (bench/results/levers-2026-12-07-stop74-semi*, levers-2026-12-07-stop71-semi-*).
 */
export const GC_FLAG = '--single-threaded-gc';
export const YOUNG_FLAG = '--max-semi-space-size=8';

export async function startServer(config: Config): Promise<RunningServer> {
  if (!process.execArgv.some((a) => a.startsWith('--heap-growing-percent'))) v8.setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  configureLogs(config, SERVER_LOG_FD);
  const log = logger('serve');
  // Before any thread of ours starts (the recorder's, the executors): they inherit the policy.
  if (config.batchScheduling && process.platform === 'linux') {
    const whyNot = batchScheduling();
    if (whyNot) log.warn(`scheduling: the threads keep the policy they started with (${whyNot}); QUERYAPIGATE_BATCH_SCHEDULING=0 says not to try`);
    else log.info('scheduling: every thread under SCHED_BATCH (QUERYAPIGATE_BATCH_SCHEDULING)');
  }
  const store = await openStore(config).catch((e: Error) => {
    const setting = config.databaseUrl ? 'QUERYAPIGATE_DATABASE_URL' : `QUERYAPIGATE_HOME (${config.home})`;
    throw new ConfigError([`${setting}: the store could not be opened: ${e.message}`]);
  });
  log.info(`store: ${describeStore(config)}`);
  log.info(
    process.execArgv.includes(GC_FLAG)
      ? `gc: each thread collects its own heap (node ${GC_FLAG})`
      : `gc: V8's helper threads collect beside the threads that serve (node started without ${GC_FLAG}, as npm start and the image give it)`,
  );
  await store.secret('mask'); // executors read it; created once per store
  const exampleKeys: RunningServer['exampleKeys'] = [];
  if (config.loadExamples) {
    const loaded = await loadExamples(store, config.home);
    await auditExamplesLoaded({ store, config }, { name: 'startup', role: 'owner', via: 'startup' }, loaded);
    for (const k of loaded.createdKeys) {
      log.info(`Example key ${k.name} (shown once): ${k.secret}  queries: ${k.queries.join(', ')}`);
      exampleKeys.push({ name: k.name, secret: k.secret });
    }
    const where = loaded.createdKeys.length
      ? 'the example keys were made now and their secrets are the lines above, shown this once'
      : 'the example keys exist; their secrets were shown once when they were made';
    log.info(`examples: ${where} (the store keeps only hashes). A new secret for one: queryapigate keys rotate ${EXAMPLE_KEY}`);
  }
  await announceMode(config, store);
  // Where the recorder runs: with a PostgreSQL store (its writes are asynchronous), on a thread that serves calls
  // already: the acceptor's inline, an executor's otherwise (a thread of its own is a second V8 heap). Not the acceptor's
  // beside executors: sharing its heap with the recorder, it scavenged for 3-5 ms at a time
  // (bench/results/levers-2026-12-05-recorder-thread-10). A SQLite store's writes are synchronous (a history batch holds
  // its thread for tens of ms), so it always has a thread of its own.
  const recorderPlace: RecorderPlace = store.db.dialect !== 'postgres' ? 'thread' : config.workers ? 'executor' : 'here';
  const recorderNote = {
    here: '; the recorder runs in the acceptor thread (a PostgreSQL store)',
    executor: '; the recorder runs in an executor thread (a PostgreSQL store)',
    thread: '; the recorder runs in a thread of its own',
  }[recorderPlace];
  log.info(
    config.workers
      ? `executors: ${config.workers} thread${config.workers === 1 ? '' : 's'} (QUERYAPIGATE_WORKERS), ${config.tasksPerWorker} calls each at once${recorderNote}`
      : `executors: none, calls run in the acceptor thread (QUERYAPIGATE_WORKERS=0)${recorderNote}`,
  );

  const events = await EventLog.open(store.db, { retentionS: config.eventRetention });
  let following = (_on: boolean): void => undefined; // the recorder's, once it is started
  const hub = new EventHub(
    (after, limit) => events.read({ after, limit }),
    (streams) => following(streams > 0),
  );
  const executors = Math.max(1, config.workers); // the inline one counts as one
  const signals = alertSignals();
  // Rate-limit buckets live in shared memory, so every thread of the process counts in the same ones.
  const limiterMemory = createLimiterMemory();
  const limits = new RateLimits({ memory: limiterMemory, redisUrl: config.redisUrl, serverRate: config.rateLimit });
  if (!(await limits.ready()))
    log.warn('Redis does not answer: rate limits are counted in this instance until it does (queryapigate_rate_limit_fallbacks_total)');
  // Calls carry how many changes the feed had posted (Request.changes); the feed starts below.
  let feed: ChangeFeed | undefined;
  const dispatcher = createDispatcher(config, limiterMemory, () => feed?.posted ?? 0);
  // Started before the server listens: no call, so no run, comes before the recorder listens.
  const recorder = await startRecorder(
    config,
    (rows) => hub.publish(rows),
    (runs) => signals.dropped.note('runs', runs),
    recorderPlace,
    dispatcher.hostRecorder,
  );
  following = recorder.following;

  // The acceptor identifies callers of /api/v1, /events and the catalog through its own metadata
  // cache, and keeps the built catalogs; both are cleared at once by its own changes and by every
  // change the feed hears of (from other instances).
  const keys = createMetadata(store, config.metadataCacheTtl);
  const catalogs = new CatalogCache();
  const heard = channel('changes', config.home);
  heard.onmessage = (e: MessageEvent) => {
    if ((e.data as ChangeMessage).kind === 'all') keys.expire();
    else keys.clear();
    catalogs.clear();
  };
  const changes = await startChangeFeed(channel('changes', config.home), config);
  feed = changes;
  const heartbeat = await startHeartbeat(store, config, 'serve');
  const control: ControlContext = {
    config,
    store,
    adminKey: config.adminKey ? Buffer.from(config.adminKey, 'utf8') : null,
    keys,
    jwt: jwtEnabled(config) ? new JwtAuth(config) : null,
    publishChange(m) {
      keys.clear();
      catalogs.clear();
      changes.publish(m);
    },
    flushHistory: () => recorder.flush(executors),
    events,
    cache: createCacheAdmin(config.redisUrl, executors, config.home),
    instanceId: heartbeat.id,
    signals,
  };
  // Every executor and the recorder answer each scrape; the fallbacks count is process-wide.
  const metrics = processMetrics(executors + 1, config.home, {
    rateLimitFallbacks: () => limits.fallbacks,
    cacheEntries: () => [{ cache: 'metadata', entries: keys.size() }],
    logLinesDropped: droppedLogLines,
  });
  const state = { draining: false };
  const app = buildApp(control, hub, dispatcher, limits, metrics, state, catalogs);
  const { token, port } = await listen(app, config.host, config.port);
  const base = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  log.info(`QueryAPIGate ${VERSION} listening on ${base}`);
  if (config.loadExamples) log.info(`Try: curl -H 'X-API-Key: <the ${EXAMPLE_KEY} secret>' '${base}/q/example_film_lookup?film_id=7'`);

  let stopping: Promise<void> | null = null;
  const stop = () =>
    (stopping ??= (async () => {
      state.draining = true;
      uWS.us_listen_socket_close(token);
      hub.close();
      await dispatcher.idle();
      const drain = channel('drain', config.home);
      drain.postMessage({ kind: 'drain' } satisfies DrainMessage); // every executor posts its last batch, marked final
      drain.close();
      await recorder.stop(executors);
      await dispatcher.close();
      heard.close();
      await changes.close();
      await limits.close();
      await heartbeat.stop();
      metrics.close();
      control.cache.close();
      await store.close();
      (app as unknown as { close(): void }).close(); // closes kept-alive sockets too
    })());
  return { port, exampleKeys, stop };
}

/** Who may manage the gateway, said at start: open mode ends silently when the first key is made. */
async function announceMode(config: Config, store: Store): Promise<void> {
  const log = logger('serve');
  if (config.adminKey) {
    log.info(
      (await store.admins.activeOwners()) > 0
        ? 'mode: named administrators; the admin key (QUERYAPIGATE_API_KEY) is break-glass: each use is logged and audited'
        : 'mode: admin key configured (QUERYAPIGATE_API_KEY); the management API answers to it',
    );
  } else if (!(await store.anyCredential())) {
    log.warn(
      'mode: open - no QUERYAPIGATE_API_KEY and no API key, so every caller is an administrator. Creating the first API key ends open mode ' +
        'and closes the management API to everyone; set QUERYAPIGATE_API_KEY first (queryapigate init writes one)',
    );
  } else {
    log.warn(
      'mode: no admin key - QUERYAPIGATE_API_KEY is not set and API keys exist, so the management API refuses every caller; set it to manage the gateway',
    );
  }
}

/** uWS takes (host, port, options, cb), though its typings only declare the form without a host. */
type ListenWithOptions = (host: string, port: number, options: number, cb: (t: uWS.us_listen_socket | false) => void) => void;

function listen(app: uWS.TemplatedApp, host: string, port: number): Promise<{ token: uWS.us_listen_socket; port: number }> {
  return new Promise((resolve, reject) => {
    // Exclusive: without it the kernel lets a second server share the port and splits the calls between them.
    (app.listen as unknown as ListenWithOptions).call(app, host, port, LISTEN_EXCLUSIVE_PORT, (t) => {
      if (t) resolve({ token: t, port: uWS.us_socket_local_port(t) });
      else
        reject(
          new ConfigError([`QUERYAPIGATE_HOST/QUERYAPIGATE_PORT: cannot listen on ${host}:${port}: the port is taken or the address is not this machine's`]),
        );
    });
  });
}
