// The `queryapigate` command as a user runs it: `node dist/src/main.js ...` as a child process in a
// folder of its own (QUERYAPIGATE_HOME a temp folder), its exit code, stdout and stderr checked, and
// what it does to the store checked over HTTP against a real server on the same home or store.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { appendFileSync, copyFileSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseEnv } from 'node:util';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { STARTER_SETTINGS, starterEnv } from '../../src/cli/init.js';
import { loadConfig } from '../../src/config.js';
import { openStore } from '../../src/store/store.js';
import { cleanEnv, cli, MAIN, ok, tempHome } from '../cli.js';
import { ADMIN_KEY, eventually, request, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const PACKAGE = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'));
const NO_STACK = /\bat .*\.js:\d+/;

/** Every command and group of the tree, as a user types its path. */
const PATHS = [
  [],
  ['serve'],
  ['init'],
  ['examples'],
  ['examples', 'load'],
  ['examples', 'unload'],
  ['keys'],
  ['keys', 'create'],
  ['keys', 'list'],
  ['keys', 'show'],
  ['keys', 'rotate'],
  ['keys', 'revoke'],
  ['admins'],
  ['admins', 'create'],
  ['admins', 'token'],
  ['admins', 'list'],
  ['audit'],
  ['audit', 'list'],
  ['audit', 'verify'],
  ['queries'],
  ['queries', 'list'],
  ['queries', 'show'],
  ['queries', 'export'],
  ['queries', 'import'],
  ['export'],
  ['backup'],
  ['restore'],
  ['migrate-to-postgres'],
  ['events'],
  ['events', 'tail'],
  ['mcp'],
];

test('--help and -h on every command and group say what it does, its options and an example; help PATH is the same', async () => {
  const home = tempHome();
  try {
    for (const path of PATHS) {
      const out = await ok([...path, '--help'], { home });
      assert.match(out, new RegExp(`^Usage: queryapigate${path.map((p) => ` ${p}`).join('')}`), path.join(' '));
      assert.match(out, /\nOptions:\n/, path.join(' '));
      assert.match(out, /\nExamples?:\n {2}queryapigate /, path.join(' '));
      assert.match(out, /-h, --help/);
      assert.equal(await ok([...path, '-h'], { home }), out);
      if (path.length) assert.equal(await ok(['help', ...path], { home }), out);
    }
    assert.match(await ok(['--help'], { home }), /Exit codes: 0 ok, 1 .*, 2 /);
    assert.match(await ok(['keys', 'revoke', '--help'], { home }), /NOTIFY/);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test('--version prints the version of package.json', async () => {
  const home = tempHome();
  try {
    assert.equal(await ok(['--version'], { home }), `${PACKAGE.version}\n`);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test('a wrong command line exits 2 with the closest command or option suggested, and no stack trace', async () => {
  const home = tempHome();
  try {
    const cases: Array<[string[], RegExp]> = [
      [['kyes', 'list'], /unknown command 'kyes'\. Did you mean 'keys'\?/],
      [['keys', 'lst'], /unknown command 'lst'\. Did you mean 'list'\?/],
      [['querys'], /Did you mean 'queries'\?/],
      [['frobnicate'], /unknown command 'frobnicate'\n/],
      [['keys', 'create', 'k', '--querys', 'a'], /unknown option '--querys'\. Did you mean '--queries'\?/],
      [['keys', 'show'], /'queryapigate keys show' needs NAME/],
      [['keys', 'show', 'a', 'b'], /takes at most 1 argument/],
      [['keys'], /'queryapigate keys' needs a command/],
      [['keys', 'rotate', 'k', '--grace-seconds', 'soon'], /--grace-seconds takes a whole number/],
      [['queries', 'export', '--format', 'xml'], /--format takes yaml or json/],
    ];
    for (const [args, said] of cases) {
      const r = await cli(args, { home });
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, said);
      assert.match(r.stderr, /Run 'queryapigate.* --help' for usage\./);
      assert.doesNotMatch(r.stderr, NO_STACK);
    }
    // A value the gateway's own rules refuse is the command line's fault too (2), named by its option.
    const bad = await cli(['keys', 'create', 'k', '--expires', '2030-02-30'], { home });
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /error: --expires: must be a date, YYYY-MM-DD \(invalid_body\)/);
    // A failure of the work is 1, one line, with the gateway's code.
    const missing = await cli(['keys', 'show', 'nobody'], { home });
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^error: API key 'nobody' not found \(key_not_found\)$/m);
    assert.equal(missing.stderr.split('\n').filter((l) => l.startsWith('error')).length, 1);
    // A bad setting is 1 and names the variable.
    const config = await cli(['keys', 'list'], { home, env: { QUERYAPIGATE_PORT: 'eighty' } });
    assert.equal(config.code, 1);
    assert.match(config.stderr, /QUERYAPIGATE_PORT="eighty": must be a whole number/);
    assert.doesNotMatch(config.stderr, NO_STACK);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test('init writes a starter .env (admin key, defaults commented, owner-only), refuses to overwrite without --force, prints no key', async () => {
  const home = tempHome();
  try {
    const out = await ok(['init'], { home });
    const file = join(home, '.env');
    assert.match(out, new RegExp(`Wrote ${file.replace(/[.]/g, '\\.')}`));
    assert.match(out, /queryapigate serve/);
    const text = readFileSync(file, 'utf8');
    const key = parseEnv(text).QUERYAPIGATE_API_KEY!;
    assert.match(key, /^qag_admin_[\w-]{43}$/);
    assert.ok(!out.includes(key), 'the key is not printed');
    assert.equal(statSync(file).mode & 0o777, 0o600);
    for (const [name] of STARTER_SETTINGS) assert.match(text, new RegExp(`^# ${name}=`, 'm'));

    const again = await cli(['init'], { home });
    assert.equal(again.code, 1);
    assert.match(again.stderr, /exists; not overwritten \(--force replaces it\)/);
    assert.equal(readFileSync(file, 'utf8'), text, 'left as it was');

    await ok(['init', '--force'], { home });
    assert.notEqual(parseEnv(readFileSync(file, 'utf8')).QUERYAPIGATE_API_KEY, key, 'a new key');

    const other = join(home, 'prod.env');
    assert.match(await ok(['init', '--out', other], { home }), /set -a; \. .*prod\.env/);
    assert.ok(parseEnv(readFileSync(other, 'utf8')).QUERYAPIGATE_API_KEY);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("init's commented defaults are the ones the server really has", () => {
  // Uncommented, the starter file must configure exactly what no file does.
  const uncommented = starterEnv('k', 'test')
    .split('\n')
    .map((l) => l.replace(/^# (QUERYAPIGATE_\w+=\S*)\s+#.*$/, '$1'))
    .join('\n');
  const env = parseEnv(uncommented);
  assert.equal(Object.keys(env).length, STARTER_SETTINGS.length + 1);
  assert.deepEqual(loadConfig(env), loadConfig({ QUERYAPIGATE_API_KEY: 'k' }));
});

/** `queryapigate serve` in `cwd`, until it says where it listens. */
function serveIn(cwd: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [MAIN, 'serve'], { cwd, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const listening = new Promise<string>((resolve, reject) => {
    child.stdout.on('data', () => {
      const m = output.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    void exited.then(() => reject(new Error(`server exited:\n${output}`)));
  });
  return {
    listening,
    output: () => output,
    async stop() {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, output);
    },
  };
}

test('serve reads ./.env without replacing variables already set, and says so', async () => {
  const folder = tempHome();
  try {
    await ok(['init'], { home: folder });
    appendFileSync(join(folder, '.env'), 'QUERYAPIGATE_PORT=0\nQUERYAPIGATE_WORKERS=0\n');
    const adminKey = parseEnv(readFileSync(join(folder, '.env'), 'utf8')).QUERYAPIGATE_API_KEY!;

    const s = serveIn(folder, {});
    try {
      const url = await s.listening;
      assert.match(s.output(), new RegExp(`read ${folder}/\\.env: 3 variable\\(s\\) set`));
      assert.ok(!s.output().includes(adminKey), 'the key is not printed');
      assert.equal((await request(url, 'GET', '/api/v1/api-keys', { key: adminKey })).status, 200);
      assert.equal((await request(url, 'GET', '/api/v1/api-keys', { key: 'wrong' })).status, 401);
    } finally {
      await s.stop();
    }

    const t = serveIn(folder, { QUERYAPIGATE_API_KEY: 'from-the-environment' });
    try {
      const url = await t.listening;
      assert.match(t.output(), /2 variable\(s\) set, QUERYAPIGATE_API_KEY kept from the environment/);
      assert.equal((await request(url, 'GET', '/api/v1/api-keys', { key: 'from-the-environment' })).status, 200);
      assert.equal((await request(url, 'GET', '/api/v1/api-keys', { key: adminKey })).status, 401);
    } finally {
      await t.stop();
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});

const film = (s: TestServer | string, key: string) => request(typeof s === 'string' ? s : s.url, 'GET', '/q/example_film_lookup?film_id=3', { key });

test('keys made, rotated and revoked by the command work over HTTP at once on a server on the same SQLite home', async () => {
  const s = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: '1' });
  const home = s.home;
  try {
    const created = await cli(
      ['keys', 'create', 'partner', '--queries', 'example_film_lookup', '--connections', '', '--expires', '2099-12-31', '--rate-limit', '100/minute'],
      { home },
    );
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stderr, new RegExp(`store: SQLite ${home}/queryapigate\\.db`));
    const secret = created.stdout.trim();
    assert.match(secret, /^sk_[\w-]{43}$/, 'the secret alone on stdout');
    assert.ok(!created.stderr.includes(secret));

    assert.equal((await film(s, secret)).status, 200);
    assert.equal((await request(s.url, 'GET', '/q/example_film_search?text=abc', { key: secret })).status, 403, 'only the query it was given');
    const wide = await cli(['keys', 'create', 'wide', '--queries', 'example_film_lookup'], { home });
    assert.match(wide.stderr, /with connections '\*' this key may call every saved query/);
    assert.equal((await request(s.url, 'GET', '/q/example_film_search?text=abc', { key: wide.stdout.trim() })).status, 200, "'*' reaches every query");

    const shown = JSON.parse(await ok(['keys', 'show', 'partner', '--json'], { home }));
    assert.deepEqual([shown.queries, shown.connections, shown.expires_at, shown.rate_limit], [['example_film_lookup'], [], '2099-12-31', '100/minute']);
    assert.deepEqual(shown, (await s.call('GET', '/api/v1/api-keys/partner')).json, 'as the management API shows it');
    const listed = await cli(['keys', 'list'], { home });
    assert.match(listed.stdout, /^partner +active +2099-12-31 +example_film_lookup +\(none\) /m);
    assert.ok(!/sk_[\w-]{20,}|hash/.test(listed.stdout + JSON.stringify(shown)), 'no secret or hash shown'); // a secret's shape: mask_predicates holds 'sk_'

    // Rotate with grace: both secrets work; without: only the new one.
    const graced = await cli(['keys', 'rotate', 'partner', '--grace-seconds', '600'], { home });
    const second = graced.stdout.trim();
    assert.match(second, /^sk_/);
    assert.match(graced.stderr, /the old one works until/);
    assert.equal((await film(s, secret)).status, 200);
    assert.equal((await film(s, second)).status, 200);
    const third = (await ok(['keys', 'rotate', 'partner'], { home })).trim();
    assert.equal((await film(s, second)).status, 401);
    assert.equal((await film(s, third)).status, 200);

    await ok(['keys', 'revoke', 'partner'], { home });
    assert.equal((await film(s, third)).status, 401);
    assert.equal((await s.call('GET', '/api/v1/api-keys/partner')).status, 404);
  } finally {
    await s.stop();
  }
});

for (const transport of ['LISTEN/NOTIFY', 'Redis pub/sub']) {
  test(`on a PostgreSQL store, a rotate or revoke by the command reaches a server that caches key rows (${transport})`, async () => {
    const store = await scratchDatabase('qag_cli_store');
    const env: Record<string, string> = { QUERYAPIGATE_DATABASE_URL: store.url, QUERYAPIGATE_METADATA_CACHE_TTL: '60' };
    if (transport === 'Redis pub/sub') env.QUERYAPIGATE_REDIS_URL = 'redis://127.0.0.1:6379';
    const s = await startTestServer({ ...env, QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: '1' });
    try {
      const created = await cli(['keys', 'create', 'cached', '--queries', 'example_film_lookup'], { home: s.home, env });
      assert.equal(created.code, 0, created.stderr);
      assert.match(created.stderr, /store: PostgreSQL postgres:\/\/postgres@127\.0\.0\.1:5432\/qag_cli_store_/);
      const first = created.stdout.trim();
      for (let i = 0; i < 4; i++) assert.equal((await film(s, first)).status, 200, 'now in the cache');

      const rotated = await cli(['keys', 'rotate', 'cached'], { home: s.home, env });
      assert.match(rotated.stderr, transport === 'Redis pub/sub' ? /told \(Redis pub\/sub\)/ : /told \(NOTIFY\)/);
      const next = rotated.stdout.trim();
      // Well inside the 60 s TTL: only the notice can explain the refusal.
      assert.equal(
        (
          await eventually(
            () => film(s, first),
            (r) => r.status === 401,
            10_000,
          )
        ).status,
        401,
        'the old secret, cached, is refused',
      );
      assert.equal((await film(s, next)).status, 200);
      for (let i = 0; i < 4; i++) await film(s, next);

      await ok(['keys', 'revoke', 'cached'], { home: s.home, env });
      assert.equal(
        (
          await eventually(
            () => film(s, next),
            (r) => r.status === 401,
            10_000,
          )
        ).status,
        401,
        'the revoked key, cached, is refused',
      );
    } finally {
      await s.stop();
      await store.drop();
    }
  });
}

test('examples load prints each new key once and installs the examples; unload removes only what is marked as an example', async () => {
  const home = tempHome();
  try {
    const loaded = JSON.parse(await ok(['examples', 'load', '--json'], { home }));
    assert.equal(loaded.created_queries, 11);
    assert.deepEqual(loaded.created_keys.map((k: { name: string }) => k.name).sort(), [
      'example-dashboard',
      'example-export',
      'example-partner',
      'example-reporting',
    ]);
    const partner = loaded.created_keys.find((k: { name: string }) => k.name === 'example-partner').secret;
    const again = await cli(['examples', 'load'], { home });
    assert.equal(again.stdout, '', 'idempotent: no new key, no secret');
    assert.match(again.stderr, /0 queries created, 0 keys created/);

    const s = await startTestServer({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: '0' });
    try {
      assert.equal((await film(s, partner)).status, 200);
      // Of your own: a key, and a query on the examples connection.
      const q = await s.call('POST', '/api/v1/queries', {
        body: { name: 'mine', connection_name: 'examples', sql: 'SELECT count(*) AS n FROM film', description: 'films', publish: true },
      });
      assert.equal(q.status, 201);
      const mine = (await ok(['keys', 'create', 'mine', '--queries', 'mine'], { home })).trim();

      const unloaded = await cli(['examples', 'unload'], { home });
      assert.equal(unloaded.code, 0, unloaded.stderr);
      assert.match(unloaded.stderr, /11 queries and 4 keys removed/);
      assert.match(unloaded.stderr, /the 'examples' connection is kept: mine still use/);
      assert.equal((await film(s, partner)).status, 401, 'the example key is gone');
      assert.deepEqual(
        (await s.call('GET', '/api/v1/queries')).json.items.map((x: { name: string }) => x.name),
        ['mine'],
      );
      assert.deepEqual(
        (await s.call('GET', '/api/v1/api-keys')).json.items.map((x: { name: string }) => x.name),
        ['mine'],
      );
      assert.equal((await request(s.url, 'GET', '/q/mine', { key: mine })).status, 200, 'yours still answers');

      assert.equal((await s.call('DELETE', '/api/v1/queries/mine')).status, 204);
      assert.match((await cli(['examples', 'unload'], { home })).stderr, /0 queries and 0 keys removed, and the connection/);
      const st = await openStore({ home, databaseUrl: null });
      assert.deepEqual(await st.listConnections(), []);
      await st.close();
    } finally {
      await s.stop();
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

/** A query as GET /api/v1/queries/{name} shows it, less what a new store cannot share (ids, times, runs). */
// biome-ignore lint/suspicious/noExplicitAny: the management API's answer, compared whole
function comparable(q: any) {
  const { created_at, updated_at, ...rest } = q;
  return {
    ...rest,
    // biome-ignore lint/suspicious/noExplicitAny: a version as the management API shows it
    versions: q.versions.map(({ uuid, created_at, last_modified_at, run_count, ...x }: any) => x),
  };
}

for (const format of ['yaml', 'json'] as const) {
  test(`queries export then import into a fresh home gives the same queries, versions, parameters and statuses (${format})`, async () => {
    const a = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: '0' });
    const b = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
    const file = join(a.home, `bundle.${format === 'yaml' ? 'yml' : 'json'}`);
    try {
      const post = async (path: string, body: unknown) => assert.ok((await a.call('POST', path, { body })).status < 300, path);
      // Three versions: v1 previous, v2 published, v3 a draft; rules of every kind; SQL with quotes, colons and a trailing space.
      await post('/api/v1/queries', {
        name: 'films_by',
        collection: 'catalog',
        connection_name: 'examples',
        sql: 'SELECT film_id, title FROM film WHERE rating = :rating LIMIT :n',
        parameters: { rating: { type: 'str', enum: ['G', 'PG', 'R'], default: 'PG' }, n: { type: 'int', min: 1, max: 50, default: 5 } },
        description: 'Films by rating',
        tags: ['films', 'demo'],
        publish: true,
      });
      await post('/api/v1/queries/films_by/versions', {
        sql: "SELECT film_id, title, 'a: b' AS note\nFROM film\nWHERE rating = :rating  \nORDER BY title\nLIMIT :n",
        parameters: { rating: { type: 'string', pattern: '^[A-Z-]+$', description: 'MPAA rating' }, n: 'int' },
        description: 'Films by rating, sorted',
        author: 'someone',
        cache_ttl: 30,
        publish: true,
      });
      await post('/api/v1/queries/films_by/versions', { sql: 'SELECT 1 AS one', description: 'draft', connection_name: null });
      // Published once, then unpublished; and a query that never was.
      await post('/api/v1/queries', { name: 'retired', connection_name: 'examples', sql: 'SELECT 2 AS two', description: 'old', publish: true });
      await post('/api/v1/queries/retired/unpublish', {});
      await post('/api/v1/queries', { name: 'draft_only', connection_name: 'examples', sql: 'SELECT :x AS x', parameters: { x: 'bool' }, description: 'd' });
      // Rolled back: v2 was published, then v1 again.
      await post('/api/v1/queries', { name: 'rolled_back', connection_name: 'examples', sql: 'SELECT 1 AS v', description: 'v1', publish: true });
      await post('/api/v1/queries/rolled_back/versions', { sql: 'SELECT 2 AS v', description: 'v2', publish: true });
      await post('/api/v1/queries/rolled_back/publish', { version: 1 });

      const exported = await cli(['queries', 'export', '--skip-examples', '--out', file, '--format', format], { home: a.home });
      assert.equal(exported.code, 0, exported.stderr);
      assert.match(exported.stderr, /exported 4 queries \(7 versions\)/);
      const bundle = format === 'json' ? JSON.parse(readFileSync(file, 'utf8')) : parseYaml(readFileSync(file, 'utf8'));
      assert.deepEqual(bundle.connections, ['examples']);
      assert.deepEqual(
        bundle.queries.map((q: { name: string }) => q.name),
        ['draft_only', 'films_by', 'retired', 'rolled_back'],
      );

      // A store without the bundle's connections is told so, and nothing is written; with it, the import runs.
      const refused = await cli(['queries', 'import', file], { home: b.home });
      assert.equal(refused.code, 1, refused.stderr);
      assert.match(refused.stderr, /connections this store does not have: 'examples'; create them first \(connection_not_found\)/);
      assert.equal((await b.call('GET', '/api/v1/queries')).json.items.length, 0);
      copyFileSync(join(a.home, 'examples.db'), join(b.home, 'examples.db'));
      assert.equal((await b.call('POST', '/api/v1/connections', { body: { name: 'examples', db: 'sqlite', database: 'examples.db' } })).status, 201);
      const imported = await cli(['queries', 'import', file], { home: b.home });
      assert.equal(imported.code, 0, imported.stderr);
      assert.match(imported.stdout, /^created films_by: 3 versions, published v2$/m);
      assert.match(imported.stdout, /^created retired: 1 version, not published$/m);
      for (const name of ['films_by', 'retired', 'draft_only', 'rolled_back']) {
        const [there, here] = await Promise.all([a.call('GET', `/api/v1/queries/${name}`), b.call('GET', `/api/v1/queries/${name}`)]);
        assert.equal(here.status, 200, name);
        assert.deepEqual(comparable(here.json), comparable(there.json), name);
      }

      // Again: nothing to do. With one version changed: only that one is added, and published.
      assert.equal(
        await ok(['queries', 'import', file], { home: b.home }),
        'unchanged draft_only\nunchanged films_by\nunchanged retired\nunchanged rolled_back\n',
      );
      const again = JSON.parse(await ok(['queries', 'import', file, '--json'], { home: b.home }));
      assert.deepEqual(
        again.queries.map((q: { action: string }) => q.action),
        ['unchanged', 'unchanged', 'unchanged', 'unchanged'],
      );
      bundle.queries[1].versions[1].sql = 'SELECT film_id FROM film WHERE rating = :rating LIMIT :n';
      writeFileSync(file, JSON.stringify(bundle));
      const changed = await ok(['queries', 'import', file], { home: b.home });
      assert.match(changed, /^updated films_by: added v4, published v4$/m);
      const after = (await b.call('GET', '/api/v1/queries/films_by')).json;
      assert.equal(after.published_version, 4);
      assert.equal(after.versions[3].sql, 'SELECT film_id FROM film WHERE rating = :rating LIMIT :n');
    } finally {
      await a.stop();
      await b.stop();
    }
  });
}

test('queries import checks the whole file before writing anything', async () => {
  const home = tempHome();
  try {
    const file = join(home, 'bad.yaml');
    const good = { name: 'fine', versions: [{ version: 1, status: 'published', description: 'ok', sql: 'SELECT 1' }] };
    const bad = { name: 'broken', versions: [{ version: 1, status: 'draft', description: 'd', sql: 'SELECT :a', parameters: { a: 'colour' } }] };
    writeFileSync(file, JSON.stringify({ format: 'queryapigate-queries/1', queries: [good, bad] }));
    const r = await cli(['queries', 'import', file], { home });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /query 'broken' version 1: Invalid parameters: a: has unknown type 'colour'.*\(invalid_body\)$/m);
    assert.match(await ok(['queries', 'list'], { home }), /No saved queries/);
    // The checks a save makes, for every version: here two statements, and a marker no parameter declares.
    for (const [sql, said] of [
      ['SELECT 1; SELECT 2', /query 'broken' version 1: Only one SQL statement is allowed \(multiple_statements\)/],
      ['SELECT :undeclared', /query 'broken' version 1: .*:undeclared.*\(param_undeclared\)/],
    ] as const) {
      const worse = { name: 'broken', versions: [{ version: 1, status: 'draft', description: 'd', sql }] };
      writeFileSync(file, JSON.stringify({ format: 'queryapigate-queries/1', queries: [good, worse] }));
      const refused = await cli(['queries', 'import', file], { home });
      assert.equal(refused.code, 1, refused.stderr);
      assert.match(refused.stderr, said);
      assert.match(await ok(['queries', 'list'], { home }), /No saved queries/);
    }

    writeFileSync(file, 'format: queryapigate-queries/1\nqueries:\n  - name: x\n    versions: []\n');
    assert.match((await cli(['queries', 'import', file], { home })).stderr, /queries\[0\]\.versions: must hold at least one version/);
    writeFileSync(file, 'not: [valid');
    assert.match((await cli(['queries', 'import', file], { home })).stderr, /not YAML or JSON/);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test('export writes what the server streams to a file, counts its rows, and says when the server refused', async () => {
  const s = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1', QUERYAPIGATE_WORKERS: '1' });
  const home = s.home;
  try {
    const direct = await s.call('GET', '/q/example_all_rentals?stream=true&format=csv');
    const rows = direct.text.split('\r\n').length - 2; // the header, and the empty string after the last newline
    // The server from QUERYAPIGATE_HOST/PORT and the admin key from QUERYAPIGATE_API_KEY, as a .env would give them.
    const env = { QUERYAPIGATE_PORT: new URL(s.url).port, QUERYAPIGATE_API_KEY: ADMIN_KEY };
    const csv = join(home, 'rentals.csv');
    const r = await cli(['export', 'example_all_rentals', '--out', csv], { home, env });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readFileSync(csv, 'utf8'), direct.text);
    assert.match(r.stderr, new RegExp(`^server: ${s.url} \\(GET /q/example_all_rentals, csv, streamed\\)$`, 'm'));
    assert.match(r.stderr, new RegExp(`^wrote ${rows.toLocaleString('en-US')} rows, [\\d.]+ [KM]B, .*/s to ${csv}$`, 'm'));
    assert.ok(!r.stderr.includes('\r') && !r.stderr.includes(ADMIN_KEY), 'no progress line when piped, no key');

    // A parameter, NDJSON from the file name, a scoped key given with --key, the URL with --url.
    const exporter = (await ok(['keys', 'create', 'exporter', '--queries', 'example_rentals_since', '--connections', ''], { home })).trim();
    const nd = join(home, 'recent.ndjson');
    await ok(['export', 'example_rentals_since', '--param', 'since=2024-06-01', '--out', nd, '--url', s.url, '--key', exporter], { home });
    const expected = await request(s.url, 'GET', '/q/example_rentals_since?stream=true&format=ndjson&since=2024-06-01', { key: exporter });
    assert.equal(readFileSync(nd, 'utf8'), expected.text);

    // Parquet, from the file name: the file is the server's bytes, whole (it ends with the footer's magic).
    const pq = join(home, 'rentals.parquet');
    const binary = await cli(['export', 'example_all_rentals', '--out', pq, '--url', s.url], { home, env });
    assert.equal(binary.code, 0, binary.stderr);
    const streamedParquet = await s.call('GET', '/q/example_all_rentals?stream=true&format=parquet');
    assert.deepEqual(new Uint8Array(readFileSync(pq)), streamedParquet.bytes);
    assert.equal(Buffer.from(streamedParquet.bytes.subarray(-4)).toString(), 'PAR1');
    assert.match(binary.stderr, new RegExp(`^wrote [\\d.]+ [KM]B, .*/s to ${pq}$`, 'm'));

    const refused = await cli(['export', 'example_all_rentals', '--out', csv, '--url', s.url, '--key', exporter], { home });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^error: .* \(query_forbidden\)$/m);
    const unknown = await cli(['export', 'no_such_query', '--url', s.url, '--key', ADMIN_KEY], { home });
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /\(query_not_found\)/);
    const down = await cli(['export', 'x', '--url', 'http://127.0.0.1:1'], { home });
    assert.equal(down.code, 1);
    assert.match(down.stderr, /cannot reach the server at http:\/\/127\.0\.0\.1:1/);
  } finally {
    await s.stop();
  }
});
