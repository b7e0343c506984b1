// The deployment files Docker would run (the Dockerfile, the Compose demo, deploy/scale-out/), checked
// without Docker, which cannot run here: every QUERYAPIGATE_* variable they set is a setting of
// config.ts and its value parses; the Dockerfile copies files that exist and starts the real entry
// point, whose /health its healthcheck really asks; haproxy accepts haproxy.cfg.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { ROOT } from '../../src/cli/commands.js';
import { loadConfig, unknownVariables } from '../../src/config.js';
import { GC_FLAG, YOUNG_FLAG } from '../../src/serve.js';
import { GATEWAY_NODE_ARGS } from '../../bench/gateway.js';
import { ADMIN_KEY, startProcess, startTestServer } from '../helpers.js';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const read = (path: string) => readFileSync(join(REPO, path), 'utf8');

interface Service {
  image?: string;
  build?: string;
  environment?: Record<string, string | number | boolean> | string[];
  ports?: string[];
  volumes?: string[];
  depends_on?: unknown;
}

function compose(path: string): Record<string, Service> {
  // `merge`: the scale-out file shares one gateway definition through a YAML merge key.
  return (parse(read(path), { merge: true }) as { services: Record<string, Service> }).services;
}

/** A service's environment as the container sees it (both Compose forms). */
function environment(s: Service): Record<string, string> {
  const env = s.environment ?? {};
  if (Array.isArray(env)) return Object.fromEntries(env.map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
  return Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
}

/** The Dockerfile's runtime ENV (the last stage), as the container starts with it. */
function dockerfileEnv(): Record<string, string> {
  const runtime =
    read('Dockerfile')
      .split(/^FROM /m)
      .at(-1) ?? '';
  const env: Record<string, string> = {};
  for (const m of runtime.matchAll(/^ENV ((?:.*\\\n)*.*)$/gm)) {
    for (const pair of m[1].replace(/\\\n/g, ' ').matchAll(/(\w+)=(\S+)/g)) env[pair[1]] = pair[2];
  }
  return env;
}

/** The Dockerfile's CMD, as an array. */
const dockerCmd = (): string[] => JSON.parse(/^CMD (\[.*\])$/m.exec(read('Dockerfile'))?.[1] ?? '[]') as string[];

/** Every setting a gateway container runs with must be known to config.ts and parse. */
function assertSettings(where: string, env: Record<string, string>) {
  const settings = Object.fromEntries(Object.entries(env).filter(([k]) => k.startsWith('QUERYAPIGATE_')));
  assert.deepEqual(unknownVariables(settings), [], `${where}: every QUERYAPIGATE_* variable is a setting`);
  assert.doesNotThrow(() => loadConfig(settings, () => undefined), `${where}: every value parses`);
  return loadConfig(settings, () => undefined);
}

test('the Compose demo: one gateway with the examples on a PostgreSQL store, metadata cache 5 s', () => {
  const services = compose('docker-compose.yml');
  const gateway = services.gateway;
  assert.equal(gateway.build, '.', 'the gateway is the repository Dockerfile');
  const config = assertSettings('docker-compose.yml gateway', { ...dockerfileEnv(), ...environment(gateway) });
  assert.equal(config.loadExamples, true);
  assert.equal(config.metadataCacheTtl, 5);
  const store = new URL(config.databaseUrl ?? 'missing:');
  assert.equal(store.hostname, 'store', 'the store is the Compose PostgreSQL service');
  assert.match(services.store.image ?? '', /^postgres:/);
  assert.equal(environment(services.store).POSTGRES_DB, store.pathname.slice(1));
  assert.deepEqual(gateway.ports, [`${config.port}:${config.port}`], 'the published port is the one the gateway listens on');
  assert.ok(
    gateway.volumes?.some((v) => v.endsWith(`:${config.home}`)),
    'QUERYAPIGATE_HOME (examples.db) is a volume',
  );
});

test('deploy/scale-out: three gateways on one store and one Redis, haproxy in front', () => {
  const services = compose('deploy/scale-out/docker-compose.yml');
  const gateways = Object.keys(services).filter((n) => n.startsWith('gateway'));
  assert.deepEqual(gateways, ['gateway1', 'gateway2', 'gateway3']);
  const configs = gateways.map((n) => {
    assert.equal(services[n].build, '../..', `${n} is the repository Dockerfile`);
    return assertSettings(`deploy/scale-out ${n}`, { ...dockerfileEnv(), ...environment(services[n]) });
  });
  for (const c of configs) {
    assert.equal(c.databaseUrl, configs[0].databaseUrl, 'one shared store');
    assert.equal(new URL(c.databaseUrl ?? 'missing:').hostname, 'store');
    assert.equal(c.redisUrl, 'redis://redis:6379', 'one shared Redis');
    assert.equal(c.metadataCacheTtl, 5, 'the setting README.md explains');
  }
  const cfg = read('deploy/scale-out/haproxy.cfg');
  for (const n of gateways) assert.match(cfg, new RegExp(`server ${n} "\\$\\{QAG_${n.toUpperCase()}-${n}:${configs[0].port}\\}"`));
  assert.ok(services.haproxy.volumes?.includes('./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro'));
  assert.match(read('deploy/scale-out/README.md'), /QUERYAPIGATE_METADATA_CACHE_TTL=5/);
});

test('haproxy.cfg: haproxy accepts it, and its health check is HTTP/1.1 on /health', () => {
  const cfg = join(REPO, 'deploy/scale-out/haproxy.cfg');
  const env = { ...process.env, QAG_LISTEN: '127.0.0.1:18080', QAG_STATS: '127.0.0.1:18404' };
  for (const i of [1, 2, 3]) Object.assign(env, { [`QAG_GATEWAY${i}`]: `127.0.0.${i}:5000` });
  const checked = spawnSync('haproxy', ['-c', '-f', cfg], { env, encoding: 'utf8' });
  assert.equal(checked.error, undefined, 'haproxy is installed (bash scripts/haproxy.sh)');
  assert.equal(checked.status, 0, checked.stdout + checked.stderr);
  assert.match(readFileSync(cfg, 'utf8'), /^\s*http-check send meth GET uri \/health ver HTTP\/1\.1 hdr Host \S+$/m);
});

test('the Dockerfile copies files that exist and starts the real entry point, whose /health its healthcheck asks', async () => {
  const dockerfile = read('Dockerfile');
  for (const m of dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
    for (const source of m[1].trim().split(/\s+/)) assert.ok(existsSync(join(REPO, source)), `COPY ${source}: exists in the repository`);
  }
  for (const m of dockerfile.matchAll(/npm run (\w+)/g)) assert.ok(JSON.parse(read('package.json')).scripts[m[1]], `npm run ${m[1]} is a script`);
  const [node, entry, command] = dockerCmd().filter((a) => !a.startsWith('--'));
  assert.equal(node, 'node');
  assert.equal(entry, JSON.parse(read('package.json')).bin.queryapigate, 'CMD runs the package bin');
  assert.ok(existsSync(join(REPO, entry)), `${entry} is what the build makes`);
  assert.ok(existsSync(join(REPO, entry.replace(/^dist\//, '').replace(/\.js$/, '.ts'))), 'and it is built from the source');
  assert.ok(
    ROOT.children.some((c) => c.name === command && c.kind === 'command'),
    `${command} is a command`,
  );

  // The healthcheck's own command, run against a real server on the port it reads, then on a dead one.
  const check = JSON.parse(/^HEALTHCHECK [^\n]*\\\n\s*CMD (\[.*\])$/m.exec(dockerfile)?.[1] ?? '[]') as string[];
  assert.equal(check[0], 'node');
  assert.match(check.join(' '), /'\/health'/);
  const s = await startTestServer({ QUERYAPIGATE_WORKERS: '0' });
  try {
    const port = new URL(s.url).port;
    // Not spawnSync: the server runs in this process and must answer meanwhile.
    const probe = (p: string) =>
      new Promise<number | null>((resolve) => {
        const child = spawn(process.execPath, check.slice(1), { env: { ...process.env, QUERYAPIGATE_PORT: p }, stdio: 'ignore' });
        child.on('exit', resolve);
      });
    assert.equal(await probe(port), 0, 'healthy server: exit 0');
    await s.stop();
    assert.equal(await probe(port), 1, 'no server: exit 1');
  } finally {
    await s.stop().catch(() => undefined);
  }
});

test('the server starts with the same node flags in the image, npm start and the benches; the start-up says how V8 collects', async () => {
  const image = dockerCmd().filter((a) => a.startsWith('--'));
  assert.ok(image.includes(GC_FLAG), `the image gives node ${GC_FLAG}`);
  assert.ok(image.includes(YOUNG_FLAG), `the image gives node ${YOUNG_FLAG}`);
  const start = /^node ((?:--\S+ )*)dist\/src\/main\.js serve$/
    .exec(JSON.parse(read('package.json')).scripts.start)?.[1]
    .trim()
    .split(' ');
  assert.deepEqual(start, image, 'npm start: the same flags');
  assert.deepEqual(GATEWAY_NODE_ARGS, image, 'the benches start the gateway with them');

  // The bin as the kernel runs it (npm makes it executable where it installs it): a first line every `env` reads.
  const bin = join(REPO, JSON.parse(read('package.json')).bin.queryapigate);
  assert.equal(readFileSync(bin, 'utf8').split('\n')[0], '#!/usr/bin/env node');
  chmodSync(bin, 0o755);
  const version = spawnSync(bin, ['--version'], { encoding: 'utf8', env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}` } });
  assert.equal(version.status, 0, version.stderr);
  assert.match(version.stdout, /\d+\.\d+\.\d+/);

  // Started with the image's flags, and without them: the start-up line says which.
  for (const flags of [image, []]) {
    const home = mkdtempSync(join(tmpdir(), 'qag-flags-'));
    const p = startProcess({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_PORT: '0', QUERYAPIGATE_API_KEY: ADMIN_KEY, QUERYAPIGATE_WORKERS: '1' }, undefined, flags);
    try {
      await p.listening;
      assert.match(p.output(), flags.length ? /gc: each thread collects its own heap \(node --single-threaded-gc\)/ : /gc: V8's helper threads collect/);
    } finally {
      p.child.kill('SIGTERM');
      await p.exited;
      rmSync(home, { recursive: true, force: true });
    }
  }
});
