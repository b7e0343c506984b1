// bench/delayproxy.c without timing: bytes pass both ways unchanged and in order, on several
// connections at once, and a client's close reaches the server. How long it holds them is not asserted.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { test } from 'node:test';
import { builtC } from '../../bench/cBuild.js';

test('delayproxy: echoed bytes come back whole and in order on 3 connections; a close reaches the server', async () => {
  let closedAtServer = 0;
  const server = createServer((s: Socket) => {
    s.pipe(s);
    s.on('end', () => closedAtServer++);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const target = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const proxy = spawn(builtC('delayproxy'), ['--target', target, '--to-us', '200', '--back-us', '300'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proxy.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<void>((r) => proxy.on('exit', () => r()));
  try {
    const port = await new Promise<number>((resolve) => {
      proxy.stdout.on('data', () => {
        const m = /listening on [\d.]+:(\d+)/.exec(out);
        if (m) resolve(Number(m[1]));
      });
    });
    const echo = async (): Promise<void> => {
      const sent = randomBytes(1 << 20);
      const c = connect(port, '127.0.0.1');
      const got: Buffer[] = [];
      let n = 0;
      const back = new Promise<void>((resolve) =>
        c.on('data', (d: Buffer) => {
          got.push(d);
          n += d.length;
          if (n >= sent.length) resolve();
        }),
      );
      for (let at = 0; at < sent.length; at += 16_384) c.write(sent.subarray(at, at + 16_384));
      await back;
      assert.ok(Buffer.concat(got).equals(sent));
      c.end();
      await new Promise<void>((r) => c.on('close', () => r()));
    };
    await Promise.all([echo(), echo(), echo()]);
    for (let i = 0; i < 100 && closedAtServer < 3; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(closedAtServer, 3);
    proxy.kill('SIGTERM');
    await exited;
    const report = JSON.parse(out.split('\n').find((l) => l.startsWith('{')) ?? '{}') as { chunks?: number };
    assert.ok((report.chunks ?? 0) > 0, out);
  } finally {
    proxy.kill('SIGTERM');
    server.close();
  }
});
