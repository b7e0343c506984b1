// Tests for /health's time_zone (http/timeZone.ts): the zone named as the C library picks it, from TZ
// or /etc/localtime, without ICU's locale data (Intl.DateTimeFormat held 8 MiB of RSS once used).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { timeZoneName } from '../../src/http/timeZone.js';
import { request, startTestServer } from '../helpers.js';

test('TZ names the zone in each of its forms; a rule or a path outside zoneinfo cannot be named', () => {
  const cases: [string, string | null][] = [
    ['Asia/Kolkata', 'Asia/Kolkata'],
    [':Europe/Paris', 'Europe/Paris'],
    ['America/Argentina/Buenos_Aires', 'America/Argentina/Buenos_Aires'],
    ['Etc/GMT+5', 'Etc/GMT+5'],
    ['UTC', 'UTC'],
    ['EST5EDT', 'EST5EDT'],
    ['/usr/share/zoneinfo/America/New_York', 'America/New_York'],
    [':/usr/share/zoneinfo/Asia/Tokyo', 'Asia/Tokyo'],
    ['', 'UTC'],
    [':', 'UTC'],
    ['EST5EDT,M3.2.0,M11.1.0', null],
    ['<+0330>-3:30', null],
    ['/etc/elsewhere', null],
    ['../zoneinfo', null],
  ];
  const none = { localtime: '/nonexistent/localtime', timezone: '/nonexistent/timezone' };
  for (const [tz, zone] of cases) assert.equal(timeZoneName(tz, none), zone, `TZ=${tz}`);
});

test('without TZ the zone is the one /etc/localtime links to, /etc/timezone names a copied file, and no file is UTC', () => {
  const dir = mkdtempSync(join(tmpdir(), 'qag-zone-'));
  const files = (name: string) => ({ localtime: join(dir, name, 'localtime'), timezone: join(dir, name, 'timezone') });
  const make = (name: string, localtime: { link: string } | { file: string } | null, timezone: string | null) => {
    const f = files(name);
    mkdirSync(join(dir, name));
    if (localtime && 'link' in localtime) symlinkSync(localtime.link, f.localtime);
    if (localtime && 'file' in localtime) writeFileSync(f.localtime, localtime.file);
    if (timezone !== null) writeFileSync(f.timezone, timezone);
    return f;
  };
  assert.equal(timeZoneName(undefined, make('linked', { link: '/usr/share/zoneinfo/Asia/Tokyo' }, 'Europe/Berlin\n')), 'Asia/Tokyo');
  assert.equal(timeZoneName(undefined, make('relative', { link: '../usr/share/zoneinfo/Etc/UTC' }, null)), 'Etc/UTC');
  assert.equal(timeZoneName(undefined, make('copied', { file: 'TZif2...' }, 'Europe/Berlin\n')), 'Europe/Berlin');
  assert.equal(timeZoneName(undefined, make('copied-alone', { file: 'TZif2...' }, null)), null);
  assert.equal(timeZoneName(undefined, make('elsewhere', { link: '/opt/zones/mine' }, null)), null);
  assert.equal(timeZoneName(undefined, make('missing', null, 'Europe/Berlin\n')), 'UTC');
});

test("/health names the server's zone without Intl.DateTimeFormat", async () => {
  const real = Intl.DateTimeFormat;
  // Any use of it would load ICU's locale data into the server for good.
  Intl.DateTimeFormat = (() => {
    throw new Error('Intl.DateTimeFormat was used');
  }) as unknown as typeof Intl.DateTimeFormat;
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  try {
    const health = await request(s.url, 'GET', '/health', { key: null });
    assert.equal(health.status, 200);
    assert.equal(health.json.time_zone, timeZoneName(process.env.TZ));
    assert.notEqual(health.json.time_zone, null, "this machine's zone has a name");
  } finally {
    Intl.DateTimeFormat = real;
    await s.stop();
  }
});
