// The caches a call reads on its path (the metadata cache, the memory result cache) read the clock to judge
// a row's age without arming a timer: lru-cache's default caches the time for 1 ms behind a setTimeout, and
// that timer woke an otherwise idle loop about once a call at one caller (ARCHITECTURE.md, "Caches").
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type CachedAnswer, createResultCache } from '../../src/call/resultCache.js';
import { createMetadata } from '../../src/store/metadata.js';
import type { Store } from '../../src/store/store.js';
import type { QueryRow } from '../../src/store/types.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How many timers `read` arms, counted through the global setTimeout (lru-cache calls it by that name). */
function timersArmedBy(read: () => void): number {
  const real = globalThis.setTimeout;
  let armed = 0;
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    armed++;
    return real(...args);
  }) as typeof setTimeout;
  try {
    read();
  } finally {
    globalThis.setTimeout = real;
  }
  return armed;
}

test('metadata rows are read from the cache without arming a timer, and still expire after their TTL', async () => {
  let reads = 0;
  const store = {
    getQuery: async (name: string) => {
      reads++;
      return { name } as unknown as QueryRow;
    },
  } as unknown as Store;
  const metadata = createMetadata(store, 0.2);
  assert.equal((await metadata.query('account'))?.name, 'account');
  assert.equal(reads, 1);
  for (let i = 0; i < 5; i++) {
    await pause(2); // a new millisecond each time: the clock is read again
    let hit: unknown;
    assert.equal(
      timersArmedBy(() => {
        hit = metadata.query('account');
      }),
      0,
    );
    assert.equal((hit as QueryRow).name, 'account', 'answered from the cache, not a promise');
  }
  assert.equal(reads, 1);
  await pause(250);
  assert.equal((await metadata.query('account'))?.name, 'account');
  assert.equal(reads, 2, 'a row past its TTL is read again');
});

test('the memory result cache answers without arming a timer, and an answer expires after its TTL', async () => {
  const cache = createResultCache(null);
  cache.set('k', { body: '[]', headers: [], etag: '"e"', meta: {} as CachedAnswer['meta'] }, 0.2);
  for (let i = 0; i < 5; i++) {
    await pause(2);
    let hit: Promise<unknown> | undefined;
    assert.equal(
      timersArmedBy(() => {
        hit = cache.get('k');
      }),
      0,
    );
    assert.ok(await hit, 'the answer is cached');
  }
  await pause(250);
  assert.equal(await cache.get('k'), undefined, 'expired');
});
