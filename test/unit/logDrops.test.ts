// Tests for the acceptor's log output when nothing takes its lines (log.ts): it holds a bounded amount,
// drops the rest whole lines at a time, and counts each dropped line for queryapigate_log_lines_dropped_total.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const LOG = fileURLToPath(new URL('../../src/log.js', import.meta.url));
const LINES = 200_000;

test('lines the output cannot take are dropped whole and counted; every other line arrives', async () => {
  // A process that logs LINES lines of ~120 bytes (24 MB, more than the 16 MiB held) in one turn, so its
  // stdout, a pipe nobody reads yet, takes almost none of them; then it reports what it dropped and exits.
  const script = `
    import { configureLogs, droppedLogLines, logger } from ${JSON.stringify(LOG)};
    configureLogs({ logLevel: 'info', jsonLogs: false }, 1);
    const log = logger('access');
    for (let i = 0; i < ${LINES}; i++) log.info({ n: i, pad: 'x'.repeat(60) }, 'request');
    process.stderr.write('dropped=' + droppedLogLines() + '\\n');
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.setEncoding('utf8');
  const reported = new Promise<number>((resolve, reject) => {
    child.stderr.on('data', (d: string) => {
      err += d;
      const m = /dropped=(\d+)/.exec(err);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', () => reject(new Error(`exited before reporting: ${err}`)));
  });
  const dropped = await reported;
  // Only now is stdout read: what was held is written as the process exits.
  const chunks: Buffer[] = [];
  child.stdout.on('data', (d: Buffer) => chunks.push(d));
  await new Promise((r) => child.on('close', r));
  const lines = Buffer.concat(chunks).toString('utf8').split('\n');
  assert.equal(lines.pop(), '', 'the output ends with a whole line');
  assert.ok(dropped > 0, 'more than the output holds was written');
  assert.ok(dropped < LINES, 'what fits is kept');
  assert.equal(lines.length + dropped, LINES, 'each line either arrived or was counted');
  for (const line of lines) assert.match(line, /INFO access request n=\d+ pad=x{60}$/);
  const numbers = lines.map((l) => Number(/n=(\d+)/.exec(l)![1]));
  assert.deepEqual(
    numbers,
    [...numbers].sort((a, b) => a - b),
    'lines arrive in the order written',
  );
});
