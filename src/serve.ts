// The composition root of a server: opens the store, starts the recorder thread, the executors and
// the change feed, builds the acceptor and listens; on stop, drains in order (stop accepting,
// finish calls in flight, every executor's last batch to the recorder, close everything).
import uWS from 'uWebSockets.js';
import type { ControlContext } from './api/routes.js';
import { RateLimits } from './auth/rateLimit.js';
import { createLimiterMemory } from './auth/sharedBuckets.js';
import { type Config, ConfigError } from './config.js';
import { channel, type DrainMessage } from './contract/messages.js';
import { CatalogCache } from './catalog/cache.js';
import { loadExamples } from './examples/load.js';
import { buildApp } from './http/app.js';
import { createDispatcher } from './http/dispatch.js';
import { EventHub } from './http/events.js';
import { processMetrics } from './metrics/metrics.js';
import { startRecorder } from './recorder/client.js';
import { startChangeFeed } from './store/changes.js';
import { EventLog } from './store/events.js';
import { createMetadata } from './store/metadata.js';
import { openStore } from './store/store.js';

/** uWS's LIBUS_LISTEN_EXCLUSIVE_PORT: no SO_REUSEPORT. */
const LISTEN_EXCLUSIVE_PORT = 1;

export interface RunningServer {
  port: number;
  stop(): Promise<void>;
}

export async function startServer(config: Config, log: (line: string) => void = console.log): Promise<RunningServer> {
  const store = await openStore(config).catch((e: Error) => {
    const setting = config.databaseUrl ? 'QUERYAPIGATE_DATABASE_URL' : `QUERYAPIGATE_HOME (${config.home})`;
    throw new ConfigError([`${setting}: the store could not be opened: ${e.message}`]);
  });
  await store.secret('mask'); // executors read it; created once per store
  if (config.loadExamples) {
    const loaded = await loadExamples(store, config.home);
    for (const k of loaded.createdKeys) log(`Example key ${k.name} (shown once): ${k.secret}  queries: ${k.queries.join(', ')}`);
  }

  const events = await EventLog.open(store.db, { retentionS: config.eventRetention });
  const hub = new EventHub((after, limit) => events.read({ after, limit }));
  const executors = Math.max(1, config.workers); // the inline one counts as one
  const recorder = await startRecorder(config, (rows) => hub.publish(rows));
  // Rate-limit buckets live in shared memory, so every thread of the process counts in the same ones.
  const limiterMemory = createLimiterMemory();
  const limits = new RateLimits({ memory: limiterMemory, redisUrl: config.redisUrl, serverRate: config.rateLimit });
  if (!(await limits.ready())) log('Redis does not answer: rate limits are counted in this instance until it does (queryapigate_rate_limit_fallbacks_total)');
  const dispatcher = createDispatcher(config, limiterMemory);

  // The acceptor identifies callers of /api/v1, /events and the catalog through its own metadata
  // cache, and keeps the built catalogs; both are cleared at once by its own changes and by every
  // change the feed hears of (from other instances).
  const keys = createMetadata(store, config.metadataCacheTtl);
  const catalogs = new CatalogCache();
  const heard = channel('changes', config.home);
  heard.onmessage = () => {
    keys.clear();
    catalogs.clear();
  };
  const changes = await startChangeFeed(channel('changes', config.home), config);
  const control: ControlContext = {
    config,
    store,
    adminKey: config.adminKey ? Buffer.from(config.adminKey, 'utf8') : null,
    keys,
    publishChange(m) {
      keys.clear();
      catalogs.clear();
      changes.publish(m);
    },
    flushHistory: () => recorder.flush(executors),
    events,
  };
  // Every executor and the recorder answer each scrape; the fallbacks count is process-wide.
  const metrics = processMetrics(executors + 1, config.home, {
    rateLimitFallbacks: () => limits.fallbacks,
    cacheEntries: () => [{ cache: 'metadata', entries: keys.size() }],
  });
  const state = { draining: false };
  const app = buildApp(control, hub, dispatcher, limits, metrics, state, catalogs);
  const { token, port } = await listen(app, config.host, config.port);

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
      metrics.close();
      await store.close();
      (app as unknown as { close(): void }).close(); // closes kept-alive sockets too
    })());
  return { port, stop };
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
