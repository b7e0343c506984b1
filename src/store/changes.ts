// In charge of telling every executor, in this process and in every other instance, that the store
// changed: locally over a BroadcastChannel; across instances over Redis pub/sub when
// QUERYAPIGATE_REDIS_URL is set, else LISTEN/NOTIFY on a PostgreSQL store. A (re)subscription
// clears everything, since a notification may have been missed while disconnected.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import postgres from 'postgres';
import type { ChangeMessage } from '../call/context.js';
import { channel } from '../call/messages.js';

export interface ChangeFeed {
  publish(m: ChangeMessage): void;
  close(): Promise<void>;
}

const PG_CHANNEL = 'queryapigate_changes';
const REDIS_CHANNEL = 'qag:changes';

export async function startChangeFeed(opts: { home: string; databaseUrl: string | null; redisUrl: string | null }): Promise<ChangeFeed> {
  const local = channel('changes', opts.home);
  const instance = randomUUID();
  const fromRemote = (payload: string) => {
    try {
      const { from, m } = JSON.parse(payload) as { from: string; m: ChangeMessage };
      if (from !== instance) local.postMessage(m);
    } catch {
      local.postMessage({ kind: 'all' } satisfies ChangeMessage);
    }
  };
  const wire = (m: ChangeMessage) => JSON.stringify({ from: instance, m });

  if (opts.redisUrl) {
    const pub = new Redis(opts.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 1 });
    const sub = new Redis(opts.redisUrl, { lazyConnect: false });
    for (const c of [pub, sub]) c.on('error', () => undefined); // reconnects by itself; logged once below
    sub.on('ready', () => local.postMessage({ kind: 'all' } satisfies ChangeMessage));
    sub.on('message', (_channel: string, payload: string) => fromRemote(payload));
    await sub.subscribe(REDIS_CHANNEL).catch((e: Error) => console.error(`change feed: Redis subscribe failed: ${e.message}`));
    return {
      publish(m) {
        local.postMessage(m);
        pub.publish(REDIS_CHANNEL, wire(m)).catch((e: Error) => console.error(`change feed: Redis publish failed: ${e.message}`));
      },
      async close() {
        local.close();
        pub.disconnect();
        sub.disconnect();
      },
    };
  }

  if (opts.databaseUrl) {
    const sql = postgres(opts.databaseUrl, { max: 1, onnotice: () => undefined, idle_timeout: 0 });
    await sql.listen(PG_CHANNEL, fromRemote, () => local.postMessage({ kind: 'all' } satisfies ChangeMessage));
    return {
      publish(m) {
        local.postMessage(m);
        sql.notify(PG_CHANNEL, wire(m)).catch((e: Error) => console.error(`change feed: NOTIFY failed: ${e.message}`));
      },
      async close() {
        local.close();
        await sql.end({ timeout: 2 });
      },
    };
  }

  return {
    publish: (m) => local.postMessage(m),
    async close() {
      local.close();
    },
  };
}
