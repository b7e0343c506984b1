// Key rules checked on every call, with a controllable clock: activity, expiry through the end of
// the day, rotation grace boundaries, address allow-lists (IPv4, IPv6, CIDR), proxy hops.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addressAllowed, isAdminKey, keyIsUsable } from '../../src/auth/keys.js';
import { forwardedClient } from '../../src/http/respond.js';
import type { KeyRow } from '../../src/store/types.js';
import { keyRow } from '../fixtures.js';

const base: KeyRow = keyRow();
const at = (s: string) => new Date(s); // local time, as the server reads expires_at

test('expires_at is valid through the last second of that day, local time', () => {
  const k = { ...base, expires_at: '2026-12-01' };
  assert.equal(keyIsUsable(k, at('2026-12-01T00:00:00'), { ip: '127.0.0.1' }), true);
  assert.equal(keyIsUsable(k, at('2026-12-01T23:59:59.999'), { ip: '127.0.0.1' }), true);
  assert.equal(keyIsUsable(k, at('2026-12-02T00:00:00'), { ip: '127.0.0.1' }), false);
});

test('an inactive key is refused', () => {
  assert.equal(keyIsUsable({ ...base, active: false }, new Date(), { ip: '127.0.0.1' }), false);
});

test('rotation: the previous secret works until the grace ends, the new one always', () => {
  const until = Date.parse('2026-12-01T12:00:00Z');
  const old = { ...base, previous_until: until, via_previous: true };
  assert.equal(keyIsUsable(old, new Date(until - 1), { ip: '::1' }), true);
  assert.equal(keyIsUsable(old, new Date(until), { ip: '::1' }), false);
  assert.equal(keyIsUsable({ ...old, previous_until: null }, new Date(0), { ip: '::1' }), false, 'no grace: refused at once');
  assert.equal(keyIsUsable({ ...old, via_previous: false }, new Date(until + 1e9), { ip: '::1' }), true, 'the new secret');
});

test('allowed_ips: IPv4, IPv6, CIDR edges; [] allows none; unknown addresses fail closed', () => {
  const cases: Array<[string[], string, boolean]> = [
    [['10.0.0.0/8'], '10.255.255.255', true],
    [['10.0.0.0/8'], '11.0.0.0', false],
    [['192.168.1.0/31'], '192.168.1.1', true],
    [['192.168.1.0/31'], '192.168.1.2', false],
    [['203.0.113.5'], '203.0.113.5', true],
    [['203.0.113.5'], '203.0.113.6', false],
    [['0.0.0.0/0'], '8.8.8.8', true],
    [['2001:db8::/32'], '2001:db8:ffff::1', true],
    [['2001:db8::/32'], '2001:db9::1', false],
    [['::1'], '::1', true],
    [['::1'], '127.0.0.1', false],
    [['2001:db8::/128'], '2001:db8::', true],
    [['2001:db8::/128'], '2001:db8::1', false],
    [[], '127.0.0.1', false],
    [['10.0.0.0/8'], '', false],
    [['10.0.0.0/8'], 'not-an-ip', false],
  ];
  for (const [allowed, ip, ok] of cases) assert.equal(addressAllowed(allowed, ip), ok, `${JSON.stringify(allowed)} ${ip}`);
});

test('proxy hops: the Nth X-Forwarded-For entry from the right; the peer when there are fewer', () => {
  const cases: Array<[string, string, number, string]> = [
    ['127.0.0.1', '', 1, '127.0.0.1'],
    ['127.0.0.1', '203.0.113.9', 0, '127.0.0.1'],
    ['127.0.0.1', '203.0.113.9', 1, '203.0.113.9'],
    ['127.0.0.1', '1.1.1.1, 203.0.113.9', 1, '203.0.113.9'],
    ['127.0.0.1', '1.1.1.1, 203.0.113.9', 2, '1.1.1.1'],
    ['127.0.0.1', '203.0.113.9', 2, '127.0.0.1'],
    ['127.0.0.1', ' 2001:db8::7 ', 1, '2001:db8::7'],
    ['::ffff:10.1.2.3', '', 0, '10.1.2.3'],
  ];
  for (const [peer, xff, hops, want] of cases) assert.equal(forwardedClient(peer, xff, hops), want, `${xff} hops ${hops}`);
});

test('isAdminKey: the configured key only, byte for byte (a scoped key is told apart by its length)', () => {
  const admin = Buffer.from('clé-admin', 'utf8');
  assert.equal(isAdminKey(admin, 'clé-admin'), true);
  assert.equal(isAdminKey(admin, 'cle-admin'), false); // one byte shorter
  assert.equal(isAdminKey(admin, 'cle-admin!'), false); // as many bytes, not the same
  assert.equal(isAdminKey(admin, 'clé-admin '), false);
  assert.equal(isAdminKey(admin, `sk_${'x'.repeat(43)}`), false);
  assert.equal(isAdminKey(admin, ''), false);
  assert.equal(isAdminKey(null, 'clé-admin'), false);
});
