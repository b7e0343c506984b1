// docs/troubleshooting.md quotes what a failed start prints: the server is started in each failing
// way (a child process, as a user starts it) and the line it prints must be one the page quotes;
// every quoted message must be one of those lines, or be in the source as it stands.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { cli, spawnCli, tempHome } from '../cli.js';
import { eventually, PG_ADMIN_URL, roleWithoutTemp } from '../helpers.js';

const PAGE = readFileSync(new URL('../../../docs/troubleshooting.md', import.meta.url), 'utf8');
const SRC = new URL('../../../src/', import.meta.url);
/** Each ```text block of the page: a message as printed, with <placeholders>. */
const QUOTED = [...PAGE.matchAll(/```text\n([\s\S]*?)\n```/g)].map((m) => m[1]);
const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const shape = (q: string) =>
  new RegExp(
    `^${q
      .split(/<[^>]+>/)
      .map(literal)
      .join('.+')}$`,
  );

const matched = new Set<string>();
/** The quoted message this printed line is, recorded as seen; fails when the page has none. */
function documented(line: string | undefined): void {
  assert.ok(line, 'the start printed nothing');
  const q = QUOTED.find((m) => shape(m).test(line));
  assert.ok(q, `docs/troubleshooting.md does not quote what the server printed:\n${line}`);
  matched.add(q);
}

/** `queryapigate serve` in a home of its own, to its end; the lines it printed on stderr. */
async function failedStart(env: Record<string, string>, home = tempHome()): Promise<string[]> {
  try {
    const r = await cli(['serve'], { home, env: { QUERYAPIGATE_PORT: '0', ...env } });
    assert.equal(r.code, 1, `the start should fail:\n${r.stdout}${r.stderr}`);
    assert.doesNotMatch(r.stderr, /\bat .*\.js:\d+/, 'no stack trace');
    return r.stderr.split('\n').filter(Boolean);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

const errorLine = (lines: string[]) => lines.find((l) => l.startsWith('error:'));

test('each failing start prints a line docs/troubleshooting.md quotes', async () => {
  const typo = await failedStart({ QUERYAPIGATE_PORTT: '1', QUERYAPIGATE_PORT: 'eighty' });
  documented(typo.find((l) => l.startsWith('warning:')));
  documented(errorLine(typo));
  documented(errorLine(await failedStart({ QUERYAPIGATE_DATABASE_URL: 'mysql://db/qag' })));
  documented(errorLine(await failedStart({ QUERYAPIGATE_MASK_KEY: 'short' })));

  const taken = createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
  try {
    const port = String((taken.address() as { port: number }).port);
    documented(errorLine(await failedStart({ QUERYAPIGATE_PORT: port })));
  } finally {
    taken.close();
  }

  const nowhere = tempHome();
  documented(errorLine(await failedStart({ QUERYAPIGATE_HOME: join(nowhere, 'missing', 'folder') }, nowhere)));
  const garbage = tempHome();
  writeFileSync(join(garbage, 'queryapigate.db'), 'not a database, just text\n'.repeat(100));
  documented(errorLine(await failedStart({}, garbage)));
  const newer = tempHome();
  const db = new Database(join(newer, 'queryapigate.db'));
  db.exec('CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (999)');
  db.close();
  documented(errorLine(await failedStart({}, newer)));

  documented(errorLine(await failedStart({ QUERYAPIGATE_DATABASE_URL: 'postgres://postgres@127.0.0.1:1/qag' })));
  documented(errorLine(await failedStart({ QUERYAPIGATE_DATABASE_URL: PG_ADMIN_URL.replace(/\/[^/]*$/, '/qag_no_such_database') })));
  const noTemp = await roleWithoutTemp('qag_trouble_notemp');
  try {
    documented(errorLine(await failedStart({ QUERYAPIGATE_DATABASE_URL: noTemp.url })));
  } finally {
    await noTemp.drop();
  }

  const home = tempHome();
  try {
    const wrong = await cli(['srve'], { home });
    assert.equal(wrong.code, 2);
    documented(errorLine(wrong.stderr.split('\n')));
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test('a start with Redis unreachable goes on, and prints the lines the page quotes', async () => {
  const home = tempHome();
  const child = spawnCli(['serve'], { home, env: { QUERYAPIGATE_PORT: '0', QUERYAPIGATE_WORKERS: '0', QUERYAPIGATE_REDIS_URL: 'redis://127.0.0.1:1' } });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise((r) => child.on('close', r));
  try {
    await eventually(
      async () => output,
      (o) => o.includes('listening on') && o.includes('heard once it does'),
      15_000,
    );
    assert.match(output, /listening on/);
    const lines = output.split('\n');
    // Log lines (log.ts, readable form): time, level, the part that logs, the message.
    documented(lines.find((l) => l.includes('Redis does not answer: rate limits')));
    documented(lines.find((l) => l.includes('Redis does not answer; changes')));
  } finally {
    child.kill('SIGTERM');
    await exited;
    rmSync(home, { recursive: true, force: true });
  }
});

test('every message the page quotes was printed by a failing start above, or is in the source word for word', () => {
  const source = readdirSync(SRC, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => readFileSync(new URL(f, SRC), 'utf8'))
    .join('\n');
  assert.ok(QUOTED.length >= 10, 'the page quotes its messages in ```text blocks');
  for (const q of QUOTED) {
    if (matched.has(q)) continue;
    assert.ok(source.includes(q), `docs/troubleshooting.md quotes a message no start printed and the source does not hold:\n${q}`);
  }
});
