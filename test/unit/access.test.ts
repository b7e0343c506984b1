// Tests for who may call what: identify (admin key, scoped keys, open mode) over an in-memory key
// lookup, the resolve/authorize decisions over store rows (versions, drafts, connections and their
// grants), and a key's own rate limits counted in real shared-memory buckets with a fixed clock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { identify, type KeyLookup } from '../../src/auth/identify.js';
import { ADMIN, OPEN, hashSecret, type Caller } from '../../src/auth/keys.js';
import { RateLimits } from '../../src/auth/rateLimit.js';
import { createLimiterMemory } from '../../src/auth/sharedBuckets.js';
import { authorizeCall, checkConnection, resolveTarget, selectVersion, type Target } from '../../src/call/authorize.js';
import { limitKey } from '../../src/call/limits.js';
import type { CallRequest } from '../../src/call/request.js';
import { GatewayError, statusOf, type ErrorCode } from '../../src/contract/errors.js';
import type { ConnectionRow, KeyRow, QueryRow, VersionRow } from '../../src/store/types.js';
import { keyRow as baseKey } from '../fixtures.js';

const KEY: KeyRow = baseKey({ name: 'reader', hash: '', queries: ['films'] });

/** A key row for `secret`, stored as the store stores it: by the secret's hash. */
function keyRow(secret: string, fields: Partial<KeyRow> = {}): KeyRow {
  return { ...KEY, hash: hashSecret(secret), ...fields };
}

/** The KeyLookup contract over a list of rows, counting lookups so a test can see what was read. */
function lookup(rows: KeyRow[]): KeyLookup & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    async key(hash) {
      reads.push('key');
      return rows.find((r) => r.hash === hash) ?? null;
    },
    async adminToken() {
      reads.push('adminToken');
      return null;
    },
    async anyKey() {
      reads.push('anyKey');
      return rows.length > 0;
    },
    async role() {
      reads.push('role');
      return null;
    },
  };
}

const ADMIN_SECRET = 'the-admin-secret';
const admin = Buffer.from(ADMIN_SECRET, 'utf8');

/** A caller's short name for the tables: 'admin', 'open', 'key:<name>', or 'nobody'. */
function who(c: Caller | null): string {
  if (c === null) return 'nobody';
  return c.kind === 'key' ? `key:${c.name}` : c.kind;
}

test('identify: admin key, scoped keys, open mode', async (t) => {
  const keys = [
    keyRow('sk_good', { name: 'good' }),
    keyRow('sk_off', { name: 'off', active: false }),
    keyRow('sk_old', { name: 'old', expires_at: '2000-01-01' }),
    keyRow('sk_later', { name: 'later', expires_at: '2999-12-31' }),
    keyRow('sk_lan', { name: 'lan', allowed_ips: ['10.0.0.0/8', '::1'] }),
    keyRow('sk_none', { name: 'none', allowed_ips: [] }),
    // a rotated-out secret whose grace ended an hour ago
    keyRow('sk_rotated', { name: 'rotated', via_previous: true, previous_until: Date.now() - 3_600_000 }),
    keyRow('sk_grace', { name: 'grace', via_previous: true, previous_until: Date.now() + 3_600_000 }),
  ];
  const cases: Array<[string, Buffer | null, KeyRow[], string, string, string]> = [
    // [label, admin key, key rows, secret sent, client address, who]
    ['the admin key', admin, keys, ADMIN_SECRET, '127.0.0.1', 'admin'],
    ['the admin key with no scoped keys', admin, [], ADMIN_SECRET, '127.0.0.1', 'admin'],
    ['a prefix of the admin key', admin, keys, ADMIN_SECRET.slice(0, -1), '127.0.0.1', 'nobody'],
    ['the admin key plus a character', admin, keys, `${ADMIN_SECRET}x`, '127.0.0.1', 'nobody'],
    ['a usable scoped key', admin, keys, 'sk_good', '127.0.0.1', 'key:good'],
    ['a usable scoped key without an admin key', null, keys, 'sk_good', '127.0.0.1', 'key:good'],
    ['an unknown secret', admin, keys, 'sk_unknown', '127.0.0.1', 'nobody'],
    ['an inactive key', admin, keys, 'sk_off', '127.0.0.1', 'nobody'],
    ['an expired key', admin, keys, 'sk_old', '127.0.0.1', 'nobody'],
    ['a key expiring later', admin, keys, 'sk_later', '127.0.0.1', 'key:later'],
    ['an address-restricted key from outside', admin, keys, 'sk_lan', '127.0.0.1', 'nobody'],
    ['an address-restricted key from inside (IPv4 CIDR)', admin, keys, 'sk_lan', '10.20.30.40', 'key:lan'],
    ['an address-restricted key from inside (IPv6)', admin, keys, 'sk_lan', '::1', 'key:lan'],
    ['an address-restricted key from an unreadable address', admin, keys, 'sk_lan', 'unknown', 'nobody'],
    ['allowed_ips [] allows nobody', admin, keys, 'sk_none', '10.0.0.1', 'nobody'],
    ['a rotated-out secret past its grace', admin, keys, 'sk_rotated', '127.0.0.1', 'nobody'],
    ['a rotated-out secret within its grace', admin, keys, 'sk_grace', '127.0.0.1', 'key:grace'],
    // no secret: open mode only while neither an admin key nor any scoped key exists
    ['no secret, no admin key, no keys: open mode', null, [], '', '127.0.0.1', 'open'],
    ['no secret, no admin key, but keys exist', null, keys, '', '127.0.0.1', 'nobody'],
    ['no secret with an admin key set', admin, [], '', '127.0.0.1', 'nobody'],
    // a secret is always checked: open mode does not accept a wrong one
    ['a wrong secret in open mode', null, [], 'sk_whatever', '127.0.0.1', 'nobody'],
  ];
  for (const [label, adminKey, rows, secret, ip, want] of cases) {
    await t.test(label, async () => {
      assert.equal(who(await identify(lookup(rows), adminKey, secret, { ip })), want);
    });
  }
});

test('identify: the callers it names', async () => {
  const row = keyRow('sk_good', { name: 'good' });
  const keys = lookup([row]);
  // the admin and open callers are the shared frozen values; a key caller carries its row
  assert.equal(await identify(keys, admin, ADMIN_SECRET, { ip: '::1' }), ADMIN);
  assert.equal(await identify(lookup([]), null, '', { ip: '::1' }), OPEN);
  assert.deepEqual(await identify(keys, admin, 'sk_good', { ip: '::1' }), { kind: 'key', name: 'good', key: row });
});

test('identify reads only what it needs', async () => {
  // the admin key is compared in memory: no store read
  const a = lookup([]);
  await identify(a, admin, ADMIN_SECRET, { ip: '::1' });
  assert.deepEqual(a.reads, []);
  // with an admin key set and no secret, nobody is asked
  const b = lookup([]);
  assert.equal(await identify(b, admin, '', { ip: '::1' }), null);
  assert.deepEqual(b.reads, []);
  // a secret is one lookup by hash; open mode one existence check
  const c = lookup([]);
  await identify(c, admin, 'sk_x', { ip: '::1' });
  await identify(c, null, '', { ip: '::1' });
  assert.deepEqual(c.reads, ['key', 'anyKey']);
});

// --- resolve and authorize ------------------------------------------------------------------

function version(n: number, fields: Partial<VersionRow> = {}): VersionRow {
  return {
    version: n,
    uuid: `uuid-${n}`,
    was_published: true,
    created_at: '',
    last_modified_at: '',
    sql: `SELECT ${n} AS v`,
    connection_name: 'pg',
    parameters: {},
    description: '',
    author: null,
    tags: [],
    cache_ttl: null,
    ...fields,
  };
}

function query(name: string, published: number | null, versions: VersionRow[]): QueryRow {
  return { name, collection: null, example: false, published_version: published, created_at: '', updated_at: '', versions };
}

// films: v1 and v2 were published (v2 is current), v3 is a draft, v4 a draft without a saved connection
const FILMS = query('films', 2, [version(1), version(2), version(3, { was_published: false }), version(4, { was_published: false, connection_name: null })]);
const NEVER = query('never', null, [version(1, { was_published: false })]);
// published_version names a version the row does not hold
const DANGLING = query('dangling', 5, [version(1)]);
// a query saved without a connection, published
const FLOATING = query('floating', 1, [version(1, { connection_name: null })]);

function asKey(name: string, fields: Partial<KeyRow>): Caller {
  return { kind: 'key', name, key: { ...KEY, name, ...fields } };
}

const CALLERS: Record<string, Caller> = {
  admin: ADMIN,
  open: OPEN,
  reader: asKey('reader', { queries: ['films', 'never', 'floating'], connections: [] }),
  // a per-query grant written as an object
  writer: asKey('writer', { queries: [{ name: 'films', allow_writes: true }], connections: [] }),
  stranger: asKey('stranger', { queries: ['other'], connections: [] }),
  // a connections grant alone, and one for everything
  analyst: asKey('analyst', { queries: [], connections: ['replica'] }),
  all: asKey('all', { queries: '*', connections: '*' }),
};

function call(fields: Partial<CallRequest> = {}): CallRequest {
  return {
    name: 'films',
    version: null,
    connectionName: null,
    format: 'json',
    page: null,
    pageSize: null,
    timeout: null,
    params: Object.create(null),
    typed: false,
    stream: false,
    ...fields,
  };
}

/** 'v<version>@<connection>' for a target, or the refusal's code. */
function resolved(q: QueryRow | null, req: CallRequest, caller: Caller): string {
  try {
    const t: Target = resolveTarget(q, req, caller);
    return `v${t.version.version}@${t.connectionName}`;
  } catch (e) {
    assert.ok(e instanceof GatewayError, String(e));
    return e.code;
  }
}

test('resolveTarget: (caller, query row, request) -> target or refusal', async (t) => {
  const cases: Array<[string, QueryRow | null, Partial<CallRequest>, string]> = [
    // [caller, query row, request, 'v<n>@<connection>' or code]
    ['admin', null, {}, 'query_not_found'],
    ['reader', null, {}, 'query_not_found'],
    // the published version on its saved connection
    ['reader', FILMS, {}, 'v2@pg'],
    ['admin', FILMS, {}, 'v2@pg'],
    ['writer', FILMS, {}, 'v2@pg'],
    ['all', FILMS, {}, 'v2@pg'],
    // a version that was published once stays callable by number
    ['reader', FILMS, { version: 1 }, 'v1@pg'],
    ['reader', FILMS, { version: 2 }, 'v2@pg'],
    // drafts: administrators (and open mode) only; a key is told the version does not exist
    ['reader', FILMS, { version: 3 }, 'version_not_found'],
    ['all', FILMS, { version: 3 }, 'version_not_found'],
    ['admin', FILMS, { version: 3 }, 'v3@pg'],
    ['open', FILMS, { version: 3 }, 'v3@pg'],
    ['admin', FILMS, { version: 9 }, 'version_not_found'],
    ['reader', FILMS, { version: 9 }, 'version_not_found'],
    // nothing published
    ['reader', NEVER, {}, 'not_published'],
    ['admin', NEVER, {}, 'not_published'],
    ['admin', NEVER, { version: 1 }, 'v1@pg'],
    ['reader', NEVER, { version: 1 }, 'version_not_found'],
    ['admin', DANGLING, {}, 'not_published'],
    // no connection saved and none asked for
    ['admin', FILMS, { version: 4 }, 'connection_required'],
    ['admin', FLOATING, {}, 'connection_required'],
    ['admin', FILMS, { version: 4, connectionName: 'pg' }, 'v4@pg'],
    ['admin', FLOATING, { connectionName: 'pg' }, 'v1@pg'],
    // another connection: a queries grant reaches the saved connection only
    ['admin', FILMS, { connectionName: 'replica' }, 'v2@replica'],
    ['reader', FILMS, { connectionName: 'pg' }, 'v2@pg'],
    ['reader', FILMS, { connectionName: 'replica' }, 'connection_forbidden'],
    ['writer', FILMS, { connectionName: 'replica' }, 'connection_forbidden'],
    // with no saved connection, any connection named is "another" one
    ['reader', FLOATING, { connectionName: 'pg' }, 'connection_forbidden'],
    // a connections grant reaches that connection (whatever the queries grant says), and only that one
    ['analyst', FILMS, { connectionName: 'replica' }, 'v2@replica'],
    // ... and on the query's own connection, without a grant for the query, the refusal is about the query
    ['analyst', FILMS, {}, 'query_forbidden'],
    ['analyst', FILMS, { connectionName: 'pg' }, 'query_forbidden'],
    ['analyst', FILMS, { connectionName: 'other' }, 'connection_forbidden'],
    ['all', FILMS, { connectionName: 'anything' }, 'v2@anything'],
    // a key without a grant for the query
    ['stranger', FILMS, {}, 'query_forbidden'],
    // ... but a connection the request asks for instead is refused as that connection
    ['stranger', FILMS, { connectionName: 'replica' }, 'connection_forbidden'],
  ];
  for (const [caller, q, req, want] of cases) {
    await t.test(`${caller}: ${q?.name ?? '(missing)'} ${JSON.stringify(req)}`, () => {
      assert.equal(resolved(q, call(req), CALLERS[caller]), want);
    });
  }
});

test('resolveTarget: the target carries the rows as read and a run timestamp', () => {
  const t = resolveTarget(FILMS, call({ version: 1 }), ADMIN);
  assert.equal(t.query, FILMS);
  assert.equal(t.version, FILMS.versions[0]);
  assert.match(t.executedAt, /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}/);
});

test("the codes are the contract's statuses", () => {
  const want: Array<[ErrorCode, number]> = [
    ['query_not_found', 404],
    ['not_published', 404],
    ['version_not_found', 404],
    ['connection_required', 400],
    ['query_forbidden', 403],
    ['connection_forbidden', 403],
    ['connection_not_found', 404],
    ['connection_inactive', 403],
  ];
  for (const [code, status] of want) assert.equal(statusOf(code), status, code);
});

test('selectVersion and authorizeCall on their own', () => {
  // the version picked is the row's own object
  assert.equal(selectVersion(FILMS, null, ADMIN), FILMS.versions[1]);
  assert.equal(selectVersion(FILMS, 3, OPEN), FILMS.versions[2]);
  assert.throws(
    () => selectVersion(FILMS, 3, CALLERS.reader),
    (e: unknown) => e instanceof GatewayError && e.code === 'version_not_found',
  );
  // administrators are never refused a connection
  assert.doesNotThrow(() => authorizeCall(ADMIN, 'films', 'pg', 'elsewhere'));
  assert.doesNotThrow(() => authorizeCall(OPEN, 'films', null, 'elsewhere'));
  assert.doesNotThrow(() => authorizeCall(CALLERS.reader, 'films', 'pg', 'pg'));
  assert.throws(() => authorizeCall(CALLERS.reader, 'films', 'pg', 'elsewhere'), /not permitted to use the connection 'elsewhere'/);
  assert.throws(
    () => authorizeCall(CALLERS.stranger, 'films', 'pg', 'pg'),
    (e: unknown) => e instanceof GatewayError && e.code === 'query_forbidden' && e.message === "This API key is not granted the query 'films'",
  );
});

function connection(fields: Partial<ConnectionRow> = {}): ConnectionRow {
  return {
    name: 'pg',
    db: 'postgres',
    active: true,
    host: '127.0.0.1',
    port: 5432,
    database: 'd',
    user: 'u',
    password: null,
    options: null,
    example: false,
    created_at: '',
    updated_at: '',
    ...fields,
  };
}

test('checkConnection: found and active, or refused', async (t) => {
  const live = connection();
  const cases: Array<[string, ConnectionRow | null, ConnectionRow | ErrorCode]> = [
    ['an active connection is returned as read', live, live],
    ['a missing connection', null, 'connection_not_found'],
    ['an inactive connection', connection({ active: false }), 'connection_inactive'],
  ];
  for (const [label, row, want] of cases) {
    await t.test(label, () => {
      let got: ConnectionRow | ErrorCode;
      try {
        got = checkConnection(row, 'pg');
      } catch (e) {
        assert.ok(e instanceof GatewayError);
        assert.match(e.message, /'pg'/, 'the message names the connection');
        got = e.code;
      }
      assert.equal(got, want);
    });
  }
});

// --- a key's own rate limits ------------------------------------------------------------------

const T0 = Date.parse('2026-12-01T12:00:00Z');

/** Real shared-memory buckets on a clock the test moves. */
function buckets() {
  const clock = { now: T0 };
  const limits = new RateLimits({ memory: createLimiterMemory(1024), redisUrl: null, serverRate: null, now: () => clock.now });
  return { limits, clock };
}

test('limitKey: 2/minute admits two calls, then refuses with Retry-After', async () => {
  const { limits, clock } = buckets();
  const key = { ...KEY, name: 'k2', rate_limit: '2/minute' };
  const first = await limitKey(limits, key, 'films');
  assert.deepEqual(first, { headers: ['X-RateLimit-Key-Limit', '2', 'X-RateLimit-Key-Remaining', '1'], refused: null });
  const second = await limitKey(limits, key, 'films');
  assert.deepEqual(second, { headers: ['X-RateLimit-Key-Limit', '2', 'X-RateLimit-Key-Remaining', '0'], refused: null });
  // the key's limit covers all its queries
  const third = await limitKey(limits, key, 'actors');
  assert.ok(third?.refused, 'the third call in the minute is refused');
  assert.equal(third.refused.allowed, false);
  assert.equal(third.refused.retryAfterS, 30); // one token every 30 s
  assert.deepEqual(third.headers, ['X-RateLimit-Key-Limit', '2', 'X-RateLimit-Key-Remaining', '0', 'Retry-After', '30']);
  // another key has its own bucket
  assert.equal((await limitKey(limits, { ...key, name: 'k3' }, 'films'))?.refused, null);
  // a token comes back after 30 s
  clock.now += 30_000;
  assert.equal((await limitKey(limits, key, 'films'))?.refused, null);
  assert.ok((await limitKey(limits, key, 'films'))?.refused);
});

test('limitKey: a per-query limit counts that query only', async () => {
  const { limits } = buckets();
  const key = { ...KEY, name: 'pq', rate_limits: { films: '1/minute' } };
  assert.deepEqual(await limitKey(limits, key, 'films'), { headers: ['X-RateLimit-Key-Limit', '1', 'X-RateLimit-Key-Remaining', '0'], refused: null });
  const refused = await limitKey(limits, key, 'films');
  assert.equal(refused?.refused?.retryAfterS, 60);
  assert.deepEqual(refused?.headers.slice(-2), ['Retry-After', '60']);
  // a query without its own limit, for a key without an overall one: no limit applies, no headers
  assert.equal(await limitKey(limits, key, 'actors'), null);
});

test("limitKey: both limits count, and the per-query one can refuse while the key's admits", async () => {
  const { limits } = buckets();
  const key = { ...KEY, name: 'both', rate_limit: '5/minute', rate_limits: { films: '1/minute' } };
  const first = await limitKey(limits, key, 'films');
  assert.equal(first?.refused, null);
  const second = await limitKey(limits, key, 'films');
  assert.equal(second?.refused?.limit, 1, 'refused by the per-query bucket');
  // the key's bucket counted both calls (5 → 3 left), and its headers come first
  assert.deepEqual(second?.headers.slice(0, 4), ['X-RateLimit-Key-Limit', '5', 'X-RateLimit-Key-Remaining', '3']);
  // other queries only meet the key's own limit
  assert.deepEqual(await limitKey(limits, key, 'actors'), { headers: ['X-RateLimit-Key-Limit', '5', 'X-RateLimit-Key-Remaining', '2'], refused: null });
});

test('limitKey: no limits, no headers; a stored rate the grammar refuses fails closed', async () => {
  const { limits } = buckets();
  assert.equal(await limitKey(limits, KEY, 'films'), null);
  assert.equal(await limitKey(limits, { ...KEY, rate_limits: {} }, 'films'), null);
  const broken = await limitKey(limits, { ...KEY, rate_limit: '0/minute' }, 'films');
  assert.equal(broken?.refused?.allowed, false);
  assert.equal(broken?.refused?.limit, 0);
});

test('authorizeCall: a collections grant reaches the queries now in the collection, on their own connection only', () => {
  const coll: Caller = { kind: 'key', name: 'c', key: baseKey({ name: 'c', connections: [], collections: ['reports'] }) };
  assert.doesNotThrow(() => authorizeCall(coll, 'q', 'pg', 'pg', 'reports'));
  assert.throws(() => authorizeCall(coll, 'q', 'pg', 'pg', 'other'), /not granted the query 'q'/);
  assert.throws(() => authorizeCall(coll, 'q', 'pg', 'pg', null), /not granted the query 'q'/);
  assert.throws(() => authorizeCall(coll, 'q', 'pg', 'elsewhere', 'reports'), /not permitted to use the connection 'elsewhere'/);
  const none: Caller = { kind: 'key', name: 'n', key: baseKey({ name: 'n', connections: [] }) };
  assert.throws(() => authorizeCall(none, 'q', 'pg', 'pg', 'reports'), /not granted/);
});
