// In charge of telling every executor, in this process and in every other instance, that the store
// changed: locally over the given BroadcastChannel; across instances over Redis pub/sub when
// QUERYAPIGATE_REDIS_URL is set, else LISTEN/NOTIFY on a PostgreSQL store. A (re)subscription
// clears everything, since a notification may have been missed while disconnected. `announceChange`
// is the one-shot side for a change made outside any server (the command line).
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Redis as RedisClient } from 'ioredis';
import postgres from 'postgres';
import type { ChangeMessage } from '../contract/messages.js';
import { logger } from '../log.js';

export interface ChangeFeed {
  publish(m: ChangeMessage): void;
  /** Changes posted to this process's executors so far (each carries its number, ChangeMessage.seq). */
  readonly posted: number;
  close(): Promise<void>;
}

/** The other instances' side: sends this instance's changes, hands theirs to `receive`. */
interface RemoteLink {
  send(payload: string): void;
  close(): Promise<void>;
}

const PG_CHANNEL = 'queryapigate_changes';
const REDIS_CHANNEL = 'qag:changes';
const ALL: ChangeMessage = { kind: 'all' };
/** ioredis, required only when Redis is configured: loaded up front it costs each thread about 12 MB of RSS. */
const ioredis = () => (createRequire(import.meta.url)('ioredis') as { Redis: typeof RedisClient }).Redis;

/** How long the start waits for Redis before it goes on without it. */
const START_WAIT_MS = 2000;

export async function startChangeFeed(local: BroadcastChannel, opts: { databaseUrl: string | null; redisUrl: string | null }): Promise<ChangeFeed> {
  const instance = randomUUID();
  let posted = 0;
  const post = (m: ChangeMessage) => local.postMessage({ ...m, seq: ++posted });
  const everything = () => post(ALL);
  const receive = (payload: string) => {
    try {
      const { from, m } = JSON.parse(payload) as { from: string; m: ChangeMessage };
      if (from !== instance) post(m);
    } catch {
      everything();
    }
  };
  const remote = opts.redisUrl
    ? await redisLink(opts.redisUrl, receive, everything)
    : opts.databaseUrl
      ? await postgresLink(opts.databaseUrl, receive, everything)
      : null;
  return {
    publish(m) {
      post(m);
      remote?.send(JSON.stringify({ from: instance, m }));
    },
    get posted() {
      return posted;
    },
    async close() {
      local.close();
      await remote?.close();
    },
  };
}

async function redisLink(url: string, receive: (payload: string) => void, subscribed: () => void): Promise<RemoteLink> {
  const Redis = ioredis();
  const pub = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1 });
  const sub = new Redis(url, { lazyConnect: false });
  for (const c of [pub, sub]) c.on('error', () => undefined); // reconnects by itself; failures logged below
  sub.on('ready', subscribed);
  sub.on('message', (_channel: string, payload: string) => receive(payload));
  // Bounded: an unreachable Redis must not hold the start. ioredis keeps trying and subscribes once it
  // answers; the 'ready' then clears every cache, since changes may have been missed meanwhile.
  const subscribing = sub.subscribe(REDIS_CHANNEL).then(
    () => true,
    (e: Error) => {
      logger('changes').warn(`Redis subscribe failed: ${e.message}`);
      return false;
    },
  );
  const answered = await Promise.race([subscribing, new Promise<false>((r) => setTimeout(() => r(false), START_WAIT_MS).unref())]);
  if (!answered) logger('changes').warn('Redis does not answer; changes made on other instances are heard once it does');
  return {
    send: (payload) => void pub.publish(REDIS_CHANNEL, payload).catch((e: Error) => logger('changes').warn(`Redis publish failed: ${e.message}`)),
    async close() {
      pub.disconnect();
      sub.disconnect();
    },
  };
}

async function postgresLink(url: string, receive: (payload: string) => void, subscribed: () => void): Promise<RemoteLink> {
  // Listening again after the store comes back: every 500 ms while it is down (postgres.js would
  // wait up to 20 s between tries once several failed, and miss other instances' changes meanwhile).
  const sql = postgres(url, { max: 1, onnotice: () => undefined, idle_timeout: 0, backoff: () => 0.5 });
  await sql.listen(PG_CHANNEL, receive, subscribed);
  return {
    send: (payload) => void sql.notify(PG_CHANNEL, payload).catch((e: Error) => logger('changes').warn(`NOTIFY failed: ${e.message}`)),
    close: () => sql.end({ timeout: 2 }),
  };
}

/**
 * Tells the running instances that share this store of a change made outside any server (the command
 * line writes the store directly), on the same channel and in the same payload as their own feeds, and
 * waits until it is sent. Returns how they were told: 'redis', 'postgres', or null when there is no
 * link between instances (a SQLite store without Redis: a server's metadata TTL bounds what it misses).
 */
export async function announceChange(
  messages: ChangeMessage[],
  opts: { databaseUrl: string | null; redisUrl: string | null },
): Promise<'redis' | 'postgres' | null> {
  if (!messages.length || (!opts.redisUrl && !opts.databaseUrl)) return null;
  const from = randomUUID(); // never a server's own instance id, so every server acts on it
  const payloads = messages.map((m) => JSON.stringify({ from, m }));
  if (opts.redisUrl) {
    const Redis = ioredis();
    const pub = new Redis(opts.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: START_WAIT_MS, retryStrategy: () => null });
    pub.on('error', () => undefined); // the failed publish below says why
    try {
      await pub.connect();
      for (const p of payloads) await pub.publish(REDIS_CHANNEL, p);
    } finally {
      pub.disconnect();
    }
    return 'redis';
  }
  const sql = postgres(opts.databaseUrl!, { max: 1, onnotice: () => undefined });
  try {
    for (const p of payloads) await sql.notify(PG_CHANNEL, p);
  } finally {
    await sql.end({ timeout: 2 });
  }
  return 'postgres';
}
