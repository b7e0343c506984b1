// bench/openloop.c without timing: its histogram's percentiles against exact ones, its paths against
// their pattern, and a short run against a node:http server whose answers come sized and chunked
// (every request due is answered and counted once, the non-2xx apart). Speed is never asserted.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { openLoopBinary, partArgs, runOpenLoop } from '../../bench/openloop.js';
import { parseUrlPattern } from '../../bench/load.js';

test('openloop: percentiles within the histogram step (1/128) of the exact ones', () => {
  const values: number[] = [];
  for (let i = 0; i < 20_000; i++) values.push(Math.floor(50 + ((i * 7919) % 20_000) ** 1.3)); // spread over 50 us to ~0.4 s
  values.push(3_000_000); // one stall
  const out = execFileSync(openLoopBinary(), ['--histogram-test'], { input: values.join('\n'), encoding: 'utf8' });
  const h = (JSON.parse(out) as { histogram: Record<string, number> }).histogram;
  const sorted = [...values].sort((a, b) => a - b);
  const exact = (p: number) => sorted[Math.ceil((p / 100) * sorted.length) - 1];
  assert.equal(h.count, values.length);
  assert.equal(h.max, 3_000_000);
  for (const [name, p] of [
    ['p50', 50],
    ['p90', 90],
    ['p99', 99],
    ['p999', 99.9],
  ] as const) {
    const e = exact(p);
    assert.ok(h[name] >= e && h[name] <= e * (1 + 1 / 128) + 1, `${name}: ${h[name]} against exact ${e}`);
  }
});

test('openloop: each path is drawn from the URL pattern, every length of aid occurs', () => {
  const { parts } = parseUrlPattern('http://127.0.0.1:1/q/account\\?aid=[1-9][0-9]{0,5}');
  const paths = execFileSync(openLoopBinary(), ['--expand-test', '3000', '--seed', '7', ...partArgs(parts)], { encoding: 'utf8' })
    .trim()
    .split('\n');
  assert.equal(paths.length, 3000);
  const lengths = new Set<number>();
  for (const p of paths) {
    const m = /^\/q\/account\?aid=([1-9][0-9]{0,5})$/.exec(p);
    assert.ok(m, p);
    lengths.add(m[1].length);
  }
  assert.deepEqual([...lengths].sort(), [1, 2, 3, 4, 5, 6]);
});

test('openloop: every request due is sent once with its headers; sized, chunked and non-2xx answers counted', async () => {
  let seen = 0;
  let bad = 0;
  const server = createServer((req, res) => {
    seen++;
    if (req.headers['x-api-key'] !== 'k1' || !/^\/q\/account\?aid=[1-9][0-9]{0,5}$/.test(req.url ?? '')) bad++;
    if (seen % 50 === 0) res.writeHead(404).end('{"error":"no"}');
    else if (seen % 2) res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"aid":1}');
    else {
      res.writeHead(200, { 'Content-Type': 'application/json' }); // no length: chunked
      res.write('[{"aid":');
      res.end('2}]');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  try {
    const r = await runOpenLoop({
      pattern: `http://127.0.0.1:${port}/q/account\\?aid=[1-9][0-9]{0,5}`,
      rate: 200,
      durationS: 1,
      connections: 4,
      headers: { 'X-API-Key': 'k1' },
      drainS: 10,
    });
    assert.equal(r.scheduled, 200);
    assert.equal(r.sent, 200);
    assert.equal(r.completed, 200);
    assert.equal(r.latency_us.count, 200);
    assert.equal(r.non2xx, 4);
    assert.deepEqual(r.errors, { connect: 0, read: 0, write: 0, timeout: 0 });
    assert.equal(r.unfinished, 0);
    assert.equal(seen, 200);
    assert.equal(bad, 0);
  } finally {
    server.close();
    server.closeAllConnections();
  }
});
