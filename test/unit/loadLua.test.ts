// bench/load.ts's two options for bench/peers.ts, with the real wrk against a node:http server: a
// Lua request() that POSTs a JSON body with a random aid (each body must parse, so its
// Content-Length is right on every request), and a CPU sampler read around the measured run.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { ensureWrk, runLoad } from '../../bench/load.js';

test('runLoad: a Lua request() POSTs a fresh body each time, and cpuSeconds is sampled around the run', async () => {
  ensureWrk(); // scripts/wrk.sh: apt-get install wrk where it is missing (the tests run as root)
  const aids = new Set<number>();
  let bad = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (d: string) => (body += d));
    req.on('end', () => {
      try {
        const aid = (JSON.parse(body) as { variables: { aid: number } }).variables.aid;
        if (req.method !== 'POST' || req.url !== '/graphql' || !(Number.isInteger(aid) && aid >= 1 && aid <= 999_999)) throw new Error(body);
        aids.add(aid);
        res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
      } catch {
        bad++;
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let samples = 0;
  try {
    const r = await runLoad({
      url: `${url}/graphql`,
      connections: 2,
      duration: 1,
      cpuSeconds: () => ++samples * 1.5,
      luaRequest: `function request()
  local n = math.random(1, 6)
  local aid = math.random(1, 9)
  for _ = 2, n do aid = aid * 10 + math.random(0, 9) end
  return wrk.format("POST", "/graphql", { ["Content-Type"] = "application/json" }, '{"variables":{"aid":' .. aid .. '}}')
end`,
    });
    assert.ok(r.requests > 10, `${r.requests} requests`);
    assert.equal(r.non2xx, 0);
    assert.equal(bad, 0);
    assert.ok(aids.size > 5, `${aids.size} distinct aids`); // random per request, not one body
    assert.equal(samples, 2);
    assert.equal(r.cpu_s, 1.5);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});
