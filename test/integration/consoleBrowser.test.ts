// The console in a real browser (Debian's Chromium through playwright-core; test/browser.ts): one
// journey from an empty store to a masked answer and a revoked key, then one test per screen, each
// with an axe-core check (no serious or critical violation). Every page but axe's keeps the
// console's CSP, and none may break it (securitypolicyviolation events are collected and must be none).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { auditPage, axeViolations, launchBrowser, type TestBrowser } from '../browser.js';
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/serve.js';
import { ADMIN_KEY, request, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

let s: TestServer;
let db: Awaited<ReturnType<typeof scratchDatabase>>;
let b: TestBrowser;
let page: Page;
const problems: string[] = [];

const PEOPLE = [
  { id: 1, name: 'Ada', email: 'ada@example.com' },
  { id: 2, name: 'Grace', email: 'grace@example.com' },
  { id: 3, name: 'Edsger', email: 'edsger@example.com' },
];

before(async () => {
  db = await scratchDatabase('qag_console');
  await db.sql`CREATE TABLE people (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL)`;
  for (const p of PEOPLE) await db.sql`INSERT INTO people ${db.sql(p)}`;
  s = await startTestServer();
  b = await launchBrowser();
  page = await watched();
});

after(async () => {
  await b?.close();
  await s?.stop();
  await db?.drop();
});

/** A page whose CSP violations, script errors and console errors are collected into `problems`. */
async function watched(): Promise<Page> {
  const p = await b.context.newPage();
  await p.addInitScript(() =>
    document.addEventListener('securitypolicyviolation', (e) => console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}`)),
  );
  p.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  p.on('console', (m) => {
    // An API error the page shows (a 4xx answer) is logged by Chromium as a failed resource: not a problem of the page.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(m.text());
  });
  p.on('dialog', (d) => void d.accept(d.type() === 'prompt' ? 'no longer used' : undefined));
  return p;
}

const screen = (path: string) => page.goto(`${s.url}/console/#/${path}`);
const field = (p: Page, label: string) => p.getByLabel(label, { exact: true });
/** The error shown next to the field labelled so (its aria-describedby), once there is one. */
async function errorOf(p: Page, label: string): Promise<string> {
  const until = Date.now() + 5000;
  for (;;) {
    const ids = (await field(p, label).getAttribute('aria-describedby')) ?? '';
    const id = ids.split(' ').find((x) => x.endsWith('-err'));
    if (id) return (await p.locator(`#${id}`).textContent()) ?? '';
    assert.ok(Date.now() < until, `no error next to "${label}"`);
    await p.waitForTimeout(50);
  }
}

async function signIn(p: Page, base = s.url) {
  await p.goto(`${base}/`);
  await field(p, 'Admin key or token').fill(ADMIN_KEY);
  await p.getByRole('button', { name: 'Sign in' }).click();
  await p.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
}

/** The screen in a page exempt from the CSP (axe is an injected script), checked by axe. */
async function assertAccessible(path: string, ready: (p: Page) => Promise<unknown>) {
  const p = await auditPage(b.context);
  try {
    await signIn(p); // session storage is the tab's own: a new tab signs in again
    await p.goto(`${s.url}/console/#/${path}`);
    await ready(p);
    const found = await axeViolations(p);
    assert.deepEqual(
      found.map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join('; ')})`),
      [],
      `axe on #/${path}`,
    );
  } finally {
    await p.close();
  }
}

let secret = '';

test('journey: sign in, connect PostgreSQL, publish a query, mask a column for a key, see it live, revoke it', async () => {
  // A wrong key is refused in words next to the field, and nothing is stored.
  await page.goto(`${s.url}/`);
  assert.equal(new URL(page.url()).pathname, '/console/');
  await field(page, 'Admin key or token').fill('not-the-key');
  await page.getByRole('button', { name: 'Sign in' }).click();
  assert.match(await errorOf(page, 'Admin key or token'), /Unauthorized/);
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  await field(page, 'Admin key or token').fill(ADMIN_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('queryapigate.api_key')), ADMIN_KEY, 'the key is in session storage');
  assert.equal(await page.evaluate(() => localStorage.length), 0, 'and nowhere that outlives the tab');

  // A PostgreSQL connection, tested, its schema browsed.
  await page.getByRole('link', { name: 'Connections' }).click();
  await page.getByRole('button', { name: 'New connection' }).click();
  await field(page, 'Name').fill('pg');
  await field(page, 'Host').fill('127.0.0.1');
  await field(page, 'Port').fill('5432');
  await field(page, 'Database').fill(db.name);
  await field(page, 'User').fill('postgres');
  await page.getByRole('button', { name: 'Save connection' }).click();
  await page.getByRole('button', { name: 'Test connection' }).click();
  await page.getByText(/Reachable: postgres \d+/).waitFor();
  await page.locator('summary', { hasText: 'public.people' }).click();
  await page.getByRole('cell', { name: 'email', exact: true }).waitFor();

  // A query, checked as it is typed: the undeclared parameter is named by the parameters, then declared.
  await page.getByRole('link', { name: 'Saved queries' }).click();
  await page.getByRole('link', { name: 'New query' }).click();
  await field(page, 'Name').fill('people');
  await field(page, 'Description').fill('People from id on');
  await page.getByRole('textbox', { name: 'SQL' }).fill('SELECT id, name, email FROM people WHERE id >= :min_id ORDER BY id');
  await page
    .getByText(/:min_id/)
    .first()
    .waitFor();
  await page.getByRole('button', { name: 'Declare :min_id' }).click();
  await page.getByLabel('min_id type').selectOption('int');
  await page.getByText('Checks pass: reads').waitFor();
  await page.getByRole('button', { name: 'Save the query' }).click();
  await page.getByRole('heading', { name: 'people', level: 1 }).waitFor();
  await page.getByRole('tab', { name: 'Versions' }).click();
  await page.getByRole('row', { name: /v1 published/ }).waitFor();

  // A key for that query with a hash mask on email; its secret is shown once.
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.getByRole('button', { name: 'New key' }).click();
  await field(page, 'Name').fill('reader');
  await field(page, 'Saved queries').fill('people');
  await page.getByRole('button', { name: 'Add a mask rule' }).click();
  await page.getByLabel('Mask rule 1 column').fill('email');
  await page.getByLabel('Mask rule 1 action').selectOption('hash');
  await page.getByRole('button', { name: 'Create the key' }).click();
  secret = ((await page.locator('.secret-value').textContent()) ?? '').trim();
  assert.ok(secret.length >= 20, 'the secret is shown');
  await page.getByRole('button', { name: 'I have kept it' }).click();
  assert.equal(await page.locator('.secret-value').count(), 0, 'and not again');
  await page
    .getByRole('row', { name: /reader/ })
    .getByText('email: hash')
    .waitFor();

  // Run as that key from the run panel: the email column is marked hashed and holds no address.
  await screen('queries/people');
  await page.getByRole('tab', { name: 'Run' }).click();
  await field(page, 'min_id (required)').fill('2');
  await field(page, 'Run as key').fill(secret);
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  await page.getByRole('columnheader', { name: /email.*hashed/ }).waitFor();
  const shown = await page.locator('table.answer tbody tr').evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
  assert.deepEqual(
    shown.map((r) => r.slice(0, 2)),
    [
      ['2', 'Grace'],
      ['3', 'Edsger'],
    ],
  );
  for (const r of shown) assert.ok(!PEOPLE.some((p) => p.email === r[2]) && (r[2] ?? '').length > 0, `email is hashed: ${r[2]}`);
  const curl = (await page.locator('pre.curl').textContent()) ?? '';
  assert.match(curl, /curl -H "X-API-Key: \$QUERYAPIGATE_KEY" '.*\/q\/people\?min_id=2&page=1&page_size=20'/);
  assert.ok(!curl.includes(secret), 'the curl command names the key as a variable, never its value');
  // The same call from outside the browser gets the same hashed values.
  const direct = await request(s.url, 'GET', '/q/people?min_id=2', { key: secret });
  assert.equal(direct.status, 200);
  assert.deepEqual(
    direct.json.map((r: { email: string }) => r.email),
    shown.map((r) => r[2]),
  );

  // The live feed shows the next run as it happens.
  await screen('history');
  await page.getByText('Live: new runs appear here.').waitFor();
  assert.equal((await request(s.url, 'GET', '/q/people?min_id=3', { key: secret })).status, 200);
  await page.locator('.feed li', { hasText: 'by reader' }).filter({ hasText: 'people' }).filter({ hasText: '1 rows' }).waitFor();

  // Revoked: gone from the list, and the next call is refused.
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.getByRole('button', { name: 'Revoke reader' }).click();
  await page.getByText('No API key yet.').waitFor();
  const refused = await request(s.url, 'GET', '/q/people?min_id=1', { key: secret });
  assert.equal(refused.status, 401);
  assert.equal(refused.json.code, 'unauthorized');
  assert.deepEqual(problems, [], 'no CSP violation, script error or console error');
});

test('Overview: health, version and charts from /metrics', async () => {
  await screen('overview');
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  const health = await request(s.url, 'GET', '/health');
  await page.locator('.tiles').getByText(health.json.version, { exact: true }).waitFor();
  await page.locator('.tiles').getByText('ok', { exact: true }).waitFor();
  // Two reads of /metrics make the first point: a call between them is counted.
  await request(s.url, 'GET', '/q/people?min_id=1');
  await page.locator('.chart svg polyline').first().waitFor({ timeout: 10_000 });
  assert.equal(await page.getByRole('img', { name: /^Calls a second over the last/ }).count(), 1);
  await assertAccessible('overview', (p) => p.locator('.chart').first().waitFor());
  assert.deepEqual(problems, []);
});

test('Connections: passwords are never shown back, errors sit by their field', async () => {
  await s.call('POST', '/api/v1/connections', {
    body: { name: 'guarded', db: 'postgres', host: '127.0.0.1', user: 'postgres', database: db.name, password: 'hunter2-secret' },
  });
  await screen('connections');
  await page.getByRole('button', { name: 'Edit guarded' }).click();
  assert.equal(await field(page, 'Password').inputValue(), '', 'the stored password is not filled in');
  assert.ok(!(await page.content()).includes('hunter2'), 'nor anywhere on the page');
  await page.getByRole('button', { name: 'Cancel' }).click();
  await page.getByRole('button', { name: 'New connection' }).click();
  await field(page, 'Name').fill('pg');
  await page.getByRole('button', { name: 'Save connection' }).click();
  assert.match(await errorOf(page, 'Name'), /Connection 'pg' already exists/);
  await field(page, 'Name').fill('badport');
  await field(page, 'Port').fill('99999');
  await page.getByRole('button', { name: 'Save connection' }).click();
  assert.match(await errorOf(page, 'Port'), /at most 65535/);
  await page.getByRole('button', { name: 'Cancel' }).click();
  await assertAccessible('connections', async (p) => {
    await p.getByRole('button', { name: 'Test and browse pg' }).click();
    await p.locator('summary', { hasText: 'public.people' }).waitFor();
  });
  assert.deepEqual(problems, []);
});

test('Saved queries: search, SQL errors as you type, versions with a diff, roll back', async () => {
  await screen('queries');
  await field(page, 'Search by name or description').fill('nomatch');
  await page.getByText('No saved query matches.').waitFor();
  await field(page, 'Search by name or description').fill('from id');
  await page.getByRole('link', { name: 'people' }).click();
  await page.getByRole('tab', { name: 'New version' }).waitFor();
  // A syntax error is told under the SQL field before saving.
  const editor = page.getByRole('textbox', { name: 'SQL' });
  await editor.fill('SELEC id FROM people WHERE id >= :min_id');
  await page.locator('#sql-err').waitFor();
  assert.match((await page.locator('#sql-err').textContent()) ?? '', /not valid PostgreSQL/);
  await editor.fill('SELECT id, name FROM people WHERE id >= :min_id ORDER BY id DESC');
  await page.getByText('Checks pass: reads').waitFor();
  await page.getByRole('button', { name: 'Save a new version' }).click();
  await page.getByRole('row', { name: /v2 published/ }).waitFor();
  const diff = (await page.locator('pre.diff').textContent()) ?? '';
  assert.match(diff, /- SELECT id, name, email FROM people WHERE id >= :min_id ORDER BY id\n/);
  assert.match(diff, /\+ SELECT id, name FROM people WHERE id >= :min_id ORDER BY id DESC\n/);
  await page.getByRole('button', { name: 'Roll back to v1' }).click();
  await page.getByRole('row', { name: /v1 published/ }).waitFor();
  assert.equal((await s.call('GET', '/api/v1/queries/people')).json.published_version, 1);
  await page.getByRole('button', { name: 'Unpublish' }).click();
  await page.getByRole('button', { name: 'Publish v2' }).waitFor();
  assert.equal((await s.call('GET', '/api/v1/queries/people')).json.published_version, null);
  await page.getByRole('button', { name: 'Publish v1' }).click();
  await page.getByRole('row', { name: /v1 published/ }).waitFor();
  await assertAccessible('queries/people', (p) => p.getByRole('textbox', { name: 'SQL' }).waitFor());
  await assertAccessible('queries', (p) => p.getByRole('link', { name: 'people' }).waitFor());
  assert.deepEqual(problems, []);
});

test('API keys: errors by their field, rotation shows a new secret that works', async () => {
  await screen('keys');
  await page.getByRole('button', { name: 'New key' }).click();
  await field(page, 'Name').fill('limited');
  await field(page, 'Saved queries').fill('peple');
  await field(page, 'Rate limit').fill('lots');
  await page.getByRole('button', { name: 'Create the key' }).click();
  assert.match(await errorOf(page, 'Rate limit'), /must look like N\/second/);
  await field(page, 'Rate limit').fill('100/minute');
  await page.getByRole('button', { name: 'Create the key' }).click();
  assert.match(await errorOf(page, 'Saved queries'), /no saved query 'peple' \(did you mean 'people'\?\)/);
  await field(page, 'Saved queries').fill('people');
  await page.getByRole('button', { name: 'Create the key' }).click();
  const first = ((await page.locator('.secret-value').textContent()) ?? '').trim();
  await page.getByRole('button', { name: 'I have kept it' }).click();
  await page.getByRole('button', { name: 'Rotate limited' }).click();
  const second = ((await page.locator('.secret-value').textContent()) ?? '').trim();
  assert.notEqual(second, first);
  assert.equal((await request(s.url, 'GET', '/q/people?min_id=1', { key: second })).status, 200);
  assert.equal((await request(s.url, 'GET', '/q/people?min_id=1', { key: first })).status, 401, 'no grace: the old secret stops');
  await page.getByRole('button', { name: 'I have kept it' }).click();
  await assertAccessible('keys', (p) => p.getByRole('row', { name: /limited/ }).waitFor());
  assert.deepEqual(problems, []);
});

test('API keys: the whole policy is written and read back (per-query writes, collections, per-query rates, write kinds, predicates)', async () => {
  const made = await request(s.url, 'POST', '/api/v1/queries', {
    body: { name: 'people_names', connection_name: 'pg', description: 'Names', collection: 'crm', publish: true, sql: 'SELECT name FROM people' },
  });
  assert.equal(made.status, 201, made.text);
  await screen('keys');
  await page.getByRole('button', { name: 'New key' }).click();
  await field(page, 'Name').fill('policy');
  await field(page, 'Saved queries').fill('people, people_names');
  await field(page, 'Queries that may write').fill('people');
  await field(page, 'Collections').fill('crm');
  await field(page, 'Rate limits per query').fill('people=10/second, people_names=5/minute');
  await field(page, 'Write operations').fill('update');
  await field(page, 'Predicates on masked columns').selectOption('refuse');
  await page.getByRole('button', { name: 'Create the key' }).click();
  await page.locator('.secret-value').waitFor();
  await page.getByRole('button', { name: 'I have kept it' }).click();
  const want = {
    queries: [{ name: 'people', allow_writes: true }, 'people_names'],
    collections: ['crm'],
    rate_limits: { people: '10/second', people_names: '5/minute' },
    allowed_write_ops: ['update'],
    mask_predicates: 'refuse',
  };
  const read = async () => {
    const k = (await request(s.url, 'GET', '/api/v1/api-keys/policy')).json;
    return {
      queries: k.queries,
      collections: k.collections,
      rate_limits: k.rate_limits,
      allowed_write_ops: k.allowed_write_ops,
      mask_predicates: k.mask_predicates,
    };
  };
  assert.deepEqual(await read(), want);
  // Edited and saved untouched, nothing of it is lost.
  await page.getByRole('button', { name: 'Edit policy' }).click();
  assert.equal(await field(page, 'Queries that may write').inputValue(), 'people');
  await page.getByRole('button', { name: 'Save the key' }).click();
  await page.getByRole('button', { name: 'Save the key' }).waitFor({ state: 'detached' });
  assert.deepEqual(await read(), want);
  assert.deepEqual(problems, []);
});

test('History: filters and a run detail', async () => {
  await screen('history');
  await field(page, 'Key').fill('limited');
  await page.getByRole('button', { name: 'Filter' }).click();
  const rows = page.getByRole('table').last().locator('tbody tr');
  // The filtered page replaces the unfiltered one: wait until no row of another key is left.
  await rows.filter({ hasText: 'limited' }).first().waitFor();
  await rows.filter({ hasNotText: 'limited' }).first().waitFor({ state: 'detached' });
  for (const t of await rows.allTextContents()) assert.match(t, /limited/);
  await rows.first().getByRole('button').click();
  await page.getByRole('heading', { name: /^Run / }).waitFor();
  assert.match((await page.locator('section pre').last().textContent()) ?? '', /"key_name": "limited"/);
  await assertAccessible('history', (p) => p.getByText('Live: new runs appear here.').waitFor());
  assert.deepEqual(problems, []);
});

test('Settings: every setting with its source, secrets only as "configured"', async () => {
  await screen('settings');
  const ttl = page.getByRole('row', { name: /QUERYAPIGATE_METADATA_CACHE_TTL/ });
  await ttl.waitFor();
  const admin = page.getByRole('row', { name: /^QUERYAPIGATE_API_KEY\b/ }); // not the rows whose help names it
  assert.match((await admin.textContent()) ?? '', /configured/);
  assert.ok(!(await page.content()).includes(ADMIN_KEY), 'the admin key is not on the page');
  await field(page, 'Filter settings').fill('metadata_cache');
  assert.equal(await page.getByRole('row', { name: /QUERYAPIGATE_/ }).count(), 1);
  await assertAccessible('settings', (p) => p.getByRole('row', { name: /QUERYAPIGATE_METADATA_CACHE_TTL/ }).waitFor());
  assert.deepEqual(problems, []);
});

test('the live feed resumes after the server comes back, missing no run and repeating none', async () => {
  // A server that stops and starts again on the same port and store, as a restarted instance would.
  const home = mkdtempSync(join(tmpdir(), 'qag-console-feed-'));
  const port = await new Promise<number>((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
  const config = loadConfig({
    QUERYAPIGATE_HOME: home,
    QUERYAPIGATE_PORT: String(port),
    QUERYAPIGATE_API_KEY: ADMIN_KEY,
    QUERYAPIGATE_LOAD_EXAMPLES: '1',
    QUERYAPIGATE_HISTORY_FLUSH_INTERVAL: '0.05',
    QUERYAPIGATE_LOG_LEVEL: 'warning',
  });
  const url = `http://127.0.0.1:${port}`;
  let server = await startServer(config);
  const p = await watched();
  const resumedFrom: string[] = [];
  p.on('request', (r) => {
    if (r.url() === `${url}/events`) resumedFrom.push(r.headers()['last-event-id'] ?? '');
  });
  try {
    await signIn(p, url);
    await p.goto(`${url}/console/#/history`);
    await p.getByText('Live: new runs appear here.').waitFor();
    assert.equal((await request(url, 'GET', '/q/example_film_lookup?film_id=7')).status, 200);
    const feed = p.locator('.feed li');
    await feed.filter({ hasText: 'example_film_lookup' }).waitFor();
    await server.stop();
    await p.locator('.feed-state', { hasText: 'Reconnecting' }).waitFor();
    server = await startServer(config);
    // Made before the page reconnects (it waits 3 s, as the server's retry says): only a resume brings it.
    assert.equal((await request(url, 'GET', '/q/example_film_search?text=an')).status, 200);
    await feed.filter({ hasText: 'example_film_search' }).waitFor({ timeout: 15_000 });
    assert.equal(await feed.filter({ hasText: 'example_film_lookup' }).count(), 1, 'the run before the drop is not sent again');
    assert.equal(await feed.count(), 2);
    assert.match(resumedFrom.at(-1) ?? '', /^\d+$/, 'the reconnect named the last event it had');
    assert.deepEqual(
      problems.filter((m) => !m.includes('/events')),
      [],
    );
  } finally {
    await p.close();
    await server.stop();
    rmSync(home, { recursive: true, force: true });
  }
});

test('an administrator signs in with a token: the screens of its role work, the others say why not', async () => {
  assert.equal((await request(s.url, 'POST', '/api/v1/administrators', { body: { name: 'dora', role: 'developer' } })).status, 201);
  const token = await request(s.url, 'POST', '/api/v1/administrators/dora/tokens', { body: { label: 'console' } });
  assert.equal(token.status, 201, token.text);
  const p = await watched();
  try {
    await p.goto(`${s.url}/`);
    await field(p, 'Admin key or token').fill(token.json.secret);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await p.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
    await p.goto(`${s.url}/console/#/queries`);
    await p
      .getByRole('row', { name: /people/ })
      .first()
      .waitFor(); // a developer reads and writes queries
    await p.goto(`${s.url}/console/#/keys`);
    await p
      .getByText(/access\.read/)
      .first()
      .waitFor(); // keys are not a developer's: the refusal, in words
    assert.ok(!(await p.content()).includes(token.json.secret), 'the token is not on the page');
    assert.ok(!p.url().includes('qagadm_'), 'nor in the URL');
  } finally {
    await p.close();
  }
});

test('a saved query and a connection are deleted from their lists, after a confirmation', async () => {
  const pg = await request(s.url, 'GET', '/api/v1/connections/pg');
  const { name: _n, created_at: _c, updated_at: _u, example: _e, ...fields } = pg.json;
  assert.equal((await request(s.url, 'POST', '/api/v1/connections', { body: { ...fields, password: undefined, name: 'spare' } })).status, 201);
  const q = { name: 'to_delete', connection_name: 'spare', description: 'Gone soon', publish: true, sql: 'SELECT 1 AS one' };
  assert.equal((await request(s.url, 'POST', '/api/v1/queries', { body: q })).status, 201);
  await screen('queries');
  await page.getByRole('button', { name: 'Delete to_delete' }).click(); // the dialog is accepted (watched)
  await page.getByRole('row', { name: /to_delete/ }).waitFor({ state: 'detached' });
  assert.equal((await request(s.url, 'GET', '/api/v1/queries/to_delete')).status, 404);
  await screen('connections');
  await page.getByRole('button', { name: 'Delete spare' }).click();
  await page.getByRole('row', { name: /spare/ }).waitFor({ state: 'detached' });
  assert.equal((await request(s.url, 'GET', '/api/v1/connections/spare')).status, 404);
  assert.deepEqual(problems, []);
});
