// Failing servers, the parts that need no server: a data source's circuit breaker (with a clock the
// test moves), which store failures are `unavailable` (503) rather than a statement's own error, and
// the metadata cache answering from the rows it has while the store cannot be read.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatewayError } from '../../src/contract/errors.js';
import { createBreaker } from '../../src/sources/breaker.js';
import { createMetadata } from '../../src/store/metadata.js';
import { isUnavailable } from '../../src/store/sql.js';
import type { Store } from '../../src/store/store.js';
import type { ConnectionRow, KeyRow, QueryRow } from '../../src/store/types.js';
import { keyRow } from '../fixtures.js';

/** Runs fn with console.error silenced (the breaker logs an outage's start and end). */
function quietly<T>(fn: () => T): T {
  const error = console.error;
  console.error = () => undefined;
  try {
    return fn();
  } finally {
    console.error = error;
  }
}

const refused = (b: ReturnType<typeof createBreaker>) => {
  try {
    b.admit();
    return false;
  } catch (e) {
    assert.ok(e instanceof GatewayError);
    assert.equal(e.code, 'connection_failed');
    return true;
  }
};

test('breaker: closed until a call cannot connect, then one probe per interval, closed again by the first call that reaches the database', () => {
  let t = 1000;
  const b = createBreaker('pg', 500, () => t);
  quietly(() => {
    assert.equal(refused(b), false, 'closed: calls go through');
    b.unreachable('connect ECONNREFUSED');
    assert.equal(refused(b), true, 'open: refused at once');
    t += 499;
    assert.equal(refused(b), true, 'still within the interval');
    t += 1;
    assert.equal(refused(b), false, 'the probe goes through');
    assert.equal(refused(b), true, 'only one probe per interval');
    b.unreachable('connect ECONNREFUSED'); // the probe failed
    t += 499;
    assert.equal(refused(b), true);
    t += 1;
    assert.equal(refused(b), false, 'the next probe');
    b.reached();
    assert.equal(refused(b), false, 'closed again');
    assert.equal(refused(b), false);
  });
});

test('breaker: its refusal carries the last failure for administrators', () => {
  let t = 0;
  const b = createBreaker('pg', 500, () => t);
  quietly(() => b.unreachable('the database system is shutting down'));
  t = 10;
  try {
    b.admit();
    assert.fail('expected a refusal');
  } catch (e) {
    assert.match((e as GatewayError).extras?.detail ?? '', /the database system is shutting down/);
  }
});

test('store failures: unreachable, restarting, full, too slow or locked are unavailable; a statement error is not', () => {
  const pg = (code: string) => Object.assign(new Error(code), { name: 'PostgresError', code });
  const cases: [unknown, boolean][] = [
    [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect' }), true],
    [Object.assign(new Error('getaddrinfo ENOTFOUND store'), { code: 'ENOTFOUND', syscall: 'getaddrinfo' }), true],
    [Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' }), true],
    [Object.assign(new Error('connect timeout'), { code: 'CONNECT_TIMEOUT' }), true],
    [Object.assign(new Error('no answer'), { code: 'STORE_TIMEOUT' }), true],
    [pg('57P01'), true], // terminated by an administrator (a fast shutdown)
    [pg('57P03'), true], // starting up or shutting down
    [pg('53300'), true], // too many connections
    [pg('57014'), true], // statement_timeout
    [pg('08006'), true],
    [Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }), true],
    [Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_READ' }), true],
    [new GatewayError('unavailable', 'x'), true],
    [pg('42P01'), false], // no such table: a statement's own error
    [pg('23505'), false],
    [Object.assign(new Error('constraint'), { code: 'SQLITE_CONSTRAINT_PRIMARYKEY' }), false],
    [new SyntaxError('Unexpected token'), false],
    [new GatewayError('query_failed', 'x'), false],
  ];
  for (const [e, want] of cases) assert.equal(isUnavailable(e), want, String((e as Error).message));
});

/** A store whose reads can be switched to failing as an unreachable store fails. */
function flakyStore(key: KeyRow) {
  const state = { down: false, reads: 0 };
  const down = () => new GatewayError('unavailable', 'The gateway cannot reach its store just now; try again shortly');
  const read = async <T>(v: T): Promise<T> => {
    state.reads++;
    if (state.down) throw down();
    return v;
  };
  const store = {
    getKeyByHash: (h: string) => read(h === key.hash ? key : null),
    getQuery: () => read(null),
    getConnection: () => read(null),
    countKeys: () => read(1),
    anyCredential: () => read(true),
  } as unknown as Store;
  return { store, state };
}

test('metadata cache: a cached row is answered at once, not as a promise; a miss and a row past its TTL are read', async () => {
  const key = keyRow({ hash: 'h1' });
  const { store, state } = flakyStore(key);
  const meta = createMetadata(store, 0.05); // 50 ms
  const first = meta.key('h1');
  assert.ok(first instanceof Promise, 'the first lookup reads the store');
  assert.equal((await first)?.name, 'k');
  const reads = state.reads;
  const again = meta.key('h1');
  assert.ok(!(again instanceof Promise), 'a cached row comes back as it is');
  assert.equal(again?.name, 'k');
  const miss = meta.key('nobody');
  assert.ok(miss instanceof Promise);
  assert.equal(await miss, null);
  assert.equal(meta.key('nobody'), null, 'a remembered miss, at once too');
  assert.equal(state.reads, reads + 1);
  await new Promise((r) => setTimeout(r, 80)); // past the TTL: read again
  assert.ok(meta.key('h1') instanceof Promise);
  // Without a TTL every lookup reads the store.
  assert.ok(createMetadata(store, 0).key('h1') instanceof Promise);
});

test('metadata cache: the calls that miss a row together wait for one read of it; after a change, calls read it afresh', async () => {
  const key = keyRow({ hash: 'h1' });
  const { store, state } = flakyStore(key);
  const meta = createMetadata(store, 0.05); // 50 ms
  const together = async () => {
    const reads = state.reads;
    const lookups = Array.from({ length: 10 }, () => meta.key('h1'));
    for (const row of await Promise.all(lookups)) assert.equal(row?.name, 'k');
    return state.reads - reads;
  };
  assert.equal(await together(), 1, 'a row never read: one read for ten calls');
  await new Promise((r) => setTimeout(r, 80)); // past the TTL
  assert.equal(await together(), 1, 'a row past its TTL: one read for ten calls');
  // A read that failed is not kept for the next calls.
  await new Promise((r) => setTimeout(r, 80));
  meta.clear();
  state.down = true;
  let reads = state.reads;
  const failing = await Promise.allSettled([meta.key('h1'), meta.key('h1'), meta.key('h1')]);
  assert.deepEqual(
    failing.map((f) => f.status),
    ['rejected', 'rejected', 'rejected'],
  );
  assert.equal(state.reads, reads + 1);
  state.down = false;
  assert.equal((await meta.key('h1'))?.name, 'k');
  assert.equal(state.reads, reads + 2, 'read again once the store answers');
  // A change while a read is in flight: calls after it do not wait for that read, they read again.
  meta.clear();
  reads = state.reads;
  const before = meta.key('h1');
  meta.clear();
  const after = meta.key('h1');
  assert.notEqual(before, after);
  await Promise.all([before, after]);
  assert.equal(state.reads, reads + 2);
  meta.expire();
  reads = state.reads;
  const beforeExpiry = meta.key('h1');
  meta.expire();
  await Promise.all([beforeExpiry, meta.key('h1')]);
  assert.equal(state.reads, reads + 2, 'an expiry too');
});

test('metadata cache: while the store is unavailable, rows past their TTL are still used; rows never read fail with unavailable', async () => {
  const key = keyRow({ hash: 'h1' });
  const { store, state } = flakyStore(key);
  const meta = createMetadata(store, 0.05); // 50 ms
  assert.equal((await meta.key('h1'))?.name, 'k');
  assert.equal(await meta.key('nobody'), null);
  await new Promise((r) => setTimeout(r, 80)); // both rows past their TTL
  state.down = true;
  const reads = state.reads;
  assert.equal((await meta.key('h1'))?.name, 'k', 'the row kept past its TTL');
  assert.equal(await meta.key('nobody'), null, 'a remembered miss too');
  assert.equal(state.reads, reads + 2, 'the store was asked first');
  await assert.rejects(
    async () => meta.query('never-read'),
    (e: unknown) => e instanceof GatewayError && e.code === 'unavailable',
  );
  // A change clears everything, stale rows included: nothing is answered from before it.
  meta.clear();
  await assert.rejects(
    async () => meta.key('h1'),
    (e: unknown) => e instanceof GatewayError && e.code === 'unavailable',
  );
  state.down = false;
  assert.equal((await meta.key('h1'))?.name, 'k');
});

test('metadata cache: a notice that changes may have been missed (the feed subscribing again) expires rows but keeps them as the fallback', async () => {
  const key = keyRow({ hash: 'h1' });
  const { store, state } = flakyStore(key);
  const meta = createMetadata(store, 60);
  assert.equal((await meta.key('h1'))?.name, 'k');
  assert.equal(await meta.anyKey(), true);
  // The store returns, the feed subscribes again and expires everything; the reader is not back yet.
  meta.expire();
  meta.expire(); // twice (two resubscriptions) keeps them too
  state.down = true;
  let reads = state.reads;
  assert.equal((await meta.key('h1'))?.name, 'k', 'served from the expired row');
  assert.equal(await meta.anyKey(), true);
  assert.equal(state.reads, reads + 2, 'the store was asked first: the rows are expired, not fresh');
  await assert.rejects(
    async () => meta.query('never-read'),
    (e: unknown) => e instanceof GatewayError && e.code === 'unavailable',
  );
  // Once the store answers, the row read is the one kept, and it is fresh again.
  state.down = false;
  assert.equal((await meta.key('h1'))?.name, 'k');
  reads = state.reads;
  assert.equal((await meta.key('h1'))?.name, 'k');
  assert.equal(state.reads, reads, 'a cache hit');
  // A change still drops everything, expired rows included.
  meta.expire();
  meta.clear();
  state.down = true;
  await assert.rejects(
    async () => meta.key('h1'),
    (e: unknown) => e instanceof GatewayError && e.code === 'unavailable',
  );
});

test('metadata without a cache: a store failure is unavailable, nothing is kept', async () => {
  const { store, state } = flakyStore(keyRow({ hash: 'h1' }));
  const meta = createMetadata(store, 0);
  assert.equal((await meta.key('h1'))?.name, 'k');
  state.down = true;
  await assert.rejects(
    async () => meta.key('h1'),
    (e: unknown) => e instanceof GatewayError && e.code === 'unavailable',
  );
});

test('metadata cache: rows filled after a mark are answered at once; a change between the mark and the fill keeps none', async () => {
  const key = keyRow({ hash: 'h1' });
  const { store, state } = flakyStore(key);
  const meta = createMetadata(store, 60);
  const query = { name: 'q', versions: [] } as unknown as QueryRow;
  const connection = { name: 'c' } as unknown as ConnectionRow;
  const rows = { keys: [['h1', key]] as Array<[string, KeyRow]>, queries: [query], connections: [connection] };

  const mark = meta.mark();
  meta.fill(mark, rows);
  assert.equal(meta.key('h1'), key, 'the filled row, at once');
  assert.equal(meta.query('q'), query);
  assert.equal(meta.connection('c'), connection);
  assert.equal(state.reads, 0, 'nothing read from the store');

  const stale = meta.mark();
  meta.clear(); // a change while the rows were being read: they may predate it
  meta.fill(stale, { keys: [['h2', keyRow({ hash: 'h2' })]], queries: [], connections: [] });
  assert.ok(meta.key('h2') instanceof Promise, 'rows read across a change are not kept');
  assert.ok(meta.key('h1') instanceof Promise, 'the change cleared the filled rows too');

  // Without a TTL nothing is kept, filled or read.
  const uncached = createMetadata(store, 0);
  uncached.fill(uncached.mark(), rows);
  assert.ok(uncached.key('h1') instanceof Promise);
});

test('metadata cache: at most 10,000 rows of a kind, the least recently used dropped first', async () => {
  const { store, state } = flakyStore(keyRow({ hash: 'h1' }));
  const meta = createMetadata(store, 60);
  for (let i = 0; i < 10_050; i++) await meta.key(`miss-${i}`); // misses are rows too (remembered as none)
  assert.equal(meta.size(), 10_000);
  const reads = state.reads;
  assert.equal(meta.key('miss-10049'), null, 'the newest, at once');
  assert.equal(meta.key('miss-50'), null, 'the oldest kept, at once');
  assert.ok(meta.key('miss-49') instanceof Promise, 'the 50 oldest were dropped: read again');
  assert.equal(state.reads, reads + 1);
});
