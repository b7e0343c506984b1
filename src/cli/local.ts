// In charge of the store commands' one way in: the store opened with the server's own config, and the
// management API's handlers (src/api) called in process, so a key or a query made on the command line
// passes exactly the checks a POST to /api/v1 does. The command line stands for the administrator: it
// holds the store itself. On close, the changes made are announced to running servers.
import { administratorRoutes } from '../api/administrators.js';
import { apiKeyRoutes } from '../api/apiKeys.js';
import type { AlertSignals } from '../api/signals.js';
import { auditRoutes } from '../api/auditLog.js';
import { handleApi } from '../api/handle.js';
import type { Caller } from '../auth/keys.js';
import type { CacheAdmin } from '../call/resultCache.js';
import { connectionRoutes } from '../api/connections.js';
import { queryRoutes } from '../api/queries.js';
import { ApiRouter, type ControlContext } from '../api/routes.js';
import type { Config } from '../config.js';
import { GatewayError } from '../contract/errors.js';
import { bodyText, type Request } from '../contract/exchange.js';
import type { ChangeMessage } from '../contract/messages.js';
import { announceChange } from '../store/changes.js';
import type { EventLog } from '../store/events.js';
import { createMetadata } from '../store/metadata.js';
import { openStore, type Store } from '../store/store.js';
import { commandConfig, storeName } from './settings.js';
import { printJson } from './print.js';
import { type Command, Failure, JSON_OUTPUT } from './tree.js';

export interface LocalControl {
  store: Store;
  /** A management call, as `METHOD /api/v1/...` would be answered; its JSON, or a thrown Failure with the code. */
  // biome-ignore lint/suspicious/noExplicitAny: answers of every route's shape, read by the command that asked
  call(method: string, path: string, body?: unknown): Promise<any>;
  /** Records a change made to the store directly (not through `call`), to announce on close. */
  changed(m?: ChangeMessage): void;
  /** Announces the changes made (if any) to running servers, closes the store; says how servers were told. */
  close(): Promise<void>;
}

/** The command line stands for an owner (it holds the store itself); audited as actor 'cli', via 'cli'. */
const CLI: Caller = Object.freeze({ kind: 'admin', name: 'cli', admin: Object.freeze({ name: 'cli', role: 'owner', via: 'cli' }) });

export async function openLocal(config: Config, say: (line: string) => void): Promise<LocalControl> {
  say(`store: ${storeName(config)}`);
  const store = await openStore(config).catch((e: Error) => {
    const setting = config.databaseUrl ? 'QUERYAPIGATE_DATABASE_URL' : `QUERYAPIGATE_HOME (${config.home})`;
    throw new Failure(`${setting}: the store could not be opened: ${e.message}`);
  });
  const router = new ApiRouter();
  connectionRoutes(router);
  queryRoutes(router);
  apiKeyRoutes(router);
  administratorRoutes(router);
  auditRoutes(router);
  router.lock();
  const changes = new Map<string, ChangeMessage>();
  const control: ControlContext = {
    config,
    store,
    adminKey: null,
    keys: createMetadata(store, 0),
    publishChange: (m) => changes.set(JSON.stringify(m), m),
    // No command calls a route that reads history or the event log (those are the server's, with its recorder).
    flushHistory: async () => undefined,
    events: null as unknown as EventLog,
    // No command lists or evicts cached answers (those are the running server's executors' or Redis's).
    cache: null as unknown as CacheAdmin,
    instanceId: null,
    // No command reads alerts (the running server's counts are its own).
    signals: null as unknown as AlertSignals,
  };
  let closed = false;
  return {
    store,
    async call(method, path, body) {
      const [url, query = ''] = path.split('?');
      const found = router.match(method, url);
      if (found === null || found === 'method_not_allowed') throw new Error(`no management route ${method} ${url}`);
      const req: Request = {
        method,
        url,
        query,
        requestId: 'cli',
        apiKey: '',
        ifNoneMatch: '',
        lastEventId: '',
        ip: '127.0.0.1',
        body: body === undefined ? null : Buffer.from(JSON.stringify(body)),
        started: performance.now(),
      };
      let answer: Awaited<ReturnType<typeof found.handler>>;
      try {
        answer = await handleApi(control, req, CLI, found);
      } catch (e) {
        if (e instanceof GatewayError) throw new Failure(e.message, e.code);
        throw e;
      }
      const text = bodyText(answer);
      const value = text ? JSON.parse(text) : null;
      if (answer.status >= 400) throw new Failure(value?.error ?? `status ${answer.status}`, value?.code);
      const change = method === 'GET' ? null : found.change(found.params);
      if (change) control.publishChange(change);
      return value;
    },
    changed: (m = { kind: 'metadata' }) => control.publishChange(m),
    async close() {
      if (closed) return;
      closed = true;
      try {
        if (changes.size) await tellServers([...changes.values()], config, say);
      } finally {
        await store.close();
      }
    },
  };
}

async function tellServers(messages: ChangeMessage[], config: Config, say: (line: string) => void): Promise<void> {
  let how: Awaited<ReturnType<typeof announceChange>>;
  try {
    how = await announceChange(messages, config);
  } catch (e) {
    throw new Failure(
      `the change is in the store, but running servers could not be told (${(e as Error).message}); ` +
        'those with QUERYAPIGATE_METADATA_CACHE_TTL see it within that many seconds',
    );
  }
  if (how === 'postgres') say('running servers on this store were told (NOTIFY)');
  else if (how === 'redis') say('running servers were told (Redis pub/sub)');
  else if (config.metadataCacheTtl > 0) {
    // Without a cache a server reads these rows on every call; with one, nothing can reach it before the TTL.
    say(`note: a SQLite store has no change feed: servers with QUERYAPIGATE_METADATA_CACHE_TTL=${config.metadataCacheTtl} see this within that many seconds`);
  }
}

/** Runs `work` on the local control with the command's config (.env, then QUERYAPIGATE_*), always closing it. */
export async function withLocal<T>(say: (line: string) => void, work: (local: LocalControl, config: Config) => Promise<T>): Promise<T> {
  const config = commandConfig(say);
  const local = await openLocal(config, say);
  try {
    return await work(local, config);
  } finally {
    await local.close();
  }
}

/**
 * A command that shows what one management GET answers: the answer as JSON with --json, else
 * `text` prints it for people.
 */
export function viewCommand(spec: {
  name: string;
  summary: string;
  usage: string;
  description?: string[];
  args: Command['args'];
  examples: string[];
  route: (args: string[]) => string;
  // biome-ignore lint/suspicious/noExplicitAny: the route's answer, as the management API shapes it
  text: (out: (line: string) => void, answer: any) => void;
}): Command {
  const { route, text, ...help } = spec;
  return {
    kind: 'command',
    ...help,
    options: { json: JSON_OUTPUT },
    run: (inv) =>
      withLocal(inv.say, async (local) => {
        const answer = await local.call('GET', route(inv.args));
        if (inv.values.json) printJson(inv.out, answer);
        else text(inv.out, answer);
      }),
  };
}
