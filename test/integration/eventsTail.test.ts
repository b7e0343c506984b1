// `queryapigate events tail` as a user runs it (a child process) against a real server: a line per
// run, NDJSON with --json, a clean end on SIGTERM, exit 1 with a clear message when the server goes away.
import assert from 'node:assert/strict';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { spawnCli, tempHome } from '../cli.js';
import { ADMIN_KEY, eventually, request, startTestServer } from '../helpers.js';

/** A running `events tail`: its output so far, and its end. */
function tail(args: string[], env: Record<string, string>) {
  const home = tempHome();
  const child: ChildProcessWithoutNullStreams = spawnCli(['events', 'tail', ...args], { home, env });
  const seen = { stdout: '', stderr: '' };
  child.stdout.on('data', (d) => (seen.stdout += d));
  child.stderr.on('data', (d) => (seen.stderr += d));
  const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  const connected = eventually(
    async () => seen.stderr,
    (s) => s.includes('connected') || s.includes('error'),
    10_000,
  );
  return { child, seen, exited, connected, cleanup: () => rmSync(home, { recursive: true, force: true }) };
}

const FILM = '/q/example_film_lookup?film_id=7';

test('events tail prints one line per run as it happens, and ends with exit 0 on SIGTERM', async () => {
  const s = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: '1' });
  const t = tail(['--url', s.url], { QUERYAPIGATE_API_KEY: ADMIN_KEY });
  try {
    await t.connected;
    assert.match(t.seen.stderr, new RegExp(`server: ${s.url} \\(GET /events, the live feed\\)`));
    assert.equal((await s.call('GET', FILM)).status, 200);
    assert.equal((await s.call('GET', '/q/example_film_lookup?film_id=0')).status, 400);
    assert.equal((await s.call('GET', '/q/example_film_search?text=zzz')).status, 200);
    const lines = await eventually(
      async () => t.seen.stdout.split('\n').filter(Boolean),
      (l) => l.length >= 2,
      10_000,
    );
    assert.match(
      lines[0],
      /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d {2}success {2}example_film_lookup v1 {2}on examples {2}1 rows {2}[\d.]+ ms {2}key admin {2}request \S+$/,
    );
    assert.match(lines[1], /example_film_search v1/);
    t.child.kill('SIGTERM');
    assert.equal(await t.exited, 0, t.seen.stderr);
    assert.match(t.seen.stderr, /stopped \(SIGTERM\)/);
  } finally {
    t.child.kill();
    t.cleanup();
    await s.stop();
  }
});

test('events tail --json prints NDJSON with event ids; a scoped key sees only its own runs; --after replays', async () => {
  const s = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: '1' });
  const made = await s.call('POST', '/api/v1/api-keys', { body: { name: 'partner', queries: ['example_film_lookup'], connections: [] } });
  const t = tail(['--url', s.url, '--json', '--key', made.json.secret], {});
  try {
    await t.connected;
    assert.equal((await s.call('GET', FILM)).status, 200, 'the admin key: not shown to partner');
    assert.equal((await request(s.url, 'GET', FILM, { key: made.json.secret })).status, 200);
    const lines = await eventually(
      async () => t.seen.stdout.split('\n').filter(Boolean),
      (l) => l.length >= 1,
      10_000,
    );
    const event = JSON.parse(lines[0]);
    assert.equal(event.type, 'execution');
    assert.equal(event.filename, 'example_film_lookup');
    assert.equal(event.entry.key_name, 'partner', 'only its own runs');
    assert.ok(Number.isInteger(event.id) && event.id > 0);
    t.child.kill('SIGINT');
    assert.equal(await t.exited, 0);

    // Replay from the event log: the admin's run before partner's comes back too.
    const r = tail(['--url', s.url, '--json', '--after', '0'], { QUERYAPIGATE_API_KEY: ADMIN_KEY });
    try {
      const replayed = await eventually(
        async () => r.seen.stdout.split('\n').filter(Boolean),
        (l) => l.length >= 2,
        10_000,
      );
      assert.deepEqual(
        replayed.map((l) => JSON.parse(l).entry.key_name),
        ['admin', 'partner'],
      );
    } finally {
      r.child.kill('SIGTERM');
      await r.exited;
      r.cleanup();
    }
  } finally {
    t.child.kill();
    t.cleanup();
    await s.stop();
  }
});

test('events tail ends with exit 1 and says so when the server goes away, is not there, or refuses the key', async () => {
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  const url = s.url;
  const t = tail(['--url', url], { QUERYAPIGATE_API_KEY: ADMIN_KEY });
  try {
    await t.connected;
    await s.stop();
    assert.equal(await t.exited, 1);
    assert.match(t.seen.stderr, new RegExp(`^error: the server at ${url} closed the feed \\(it stopped or restarted\\)$`, 'm'));

    const gone = tail(['--url', url], { QUERYAPIGATE_API_KEY: ADMIN_KEY });
    assert.equal(await gone.exited, 1);
    assert.match(gone.seen.stderr, /^error: cannot reach the server at http:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED/m);
    gone.cleanup();
  } finally {
    t.child.kill();
    t.cleanup();
  }
  const other = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  const bad = tail(['--url', other.url, '--key', 'not-a-key'], {});
  try {
    assert.equal(await bad.exited, 1);
    assert.match(bad.seen.stderr, /^error: .* \(unauthorized\)$/m);
    assert.doesNotMatch(bad.seen.stderr, /\bat .*\.js:\d+/);
  } finally {
    bad.cleanup();
    await other.stop();
  }
});
