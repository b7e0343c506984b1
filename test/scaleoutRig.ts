// The scale-out topology of deploy/scale-out/ as processes on this machine, for the scale-out test and
// its bench: gateway processes, each in its own network namespace with its own address on a bridge
// (the way separate hosts would be), haproxy running deploy/scale-out/haproxy.cfg itself in front, and
// the machine's PostgreSQL (a fresh store database per rig) and Redis. The namespaces reach those two
// through a TCP relay on the bridge (a second haproxy config in the same process), as hosts reach a
// database across a network. Without `ip netns` (not root), the instances listen on 127.0.1.x instead.
// Everything the rig made is removed by close(), and by an exit hook if close() never ran.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADMIN_KEY, request, scratchDatabase } from './helpers.js';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));
const HAPROXY_CFG = fileURLToPath(new URL('../../deploy/scale-out/haproxy.cfg', import.meta.url));
const GATEWAY_PORT = 5000;

export interface Instance {
  readonly name: string;
  /** http://address:5000, reached directly (not through haproxy). */
  readonly url: string;
  /** Starts the process (again, after a kill or a stop, on the same home folder). */
  start(): Promise<void>;
  signal(s: NodeJS.Signals): void;
  /** Resolves with the exit code of the current process. */
  exited(): Promise<number | null>;
  running(): boolean;
  /** The current process's id (the gateway's node process itself). */
  pid(): number;
  output(): string;
}

export interface Rig {
  /** Where callers connect: haproxy's frontend. */
  readonly lb: string;
  readonly instances: Instance[];
  /** The address the instances reach PostgreSQL and Redis at (for data-source connections). */
  readonly serviceHost: string;
  /** The store's database (fresh per rig, dropped by close()). */
  readonly storeDatabase: string;
  /** 'netns' (one namespace per instance) or 'loopback' (127.0.1.x, when namespaces cannot be made). */
  readonly isolation: 'netns' | 'loopback';
  /** haproxy's view of each instance: UP, DOWN, 'UP 1/2', ... */
  states(): Promise<Record<string, string>>;
  /** Milliseconds until haproxy reports `name` in `state` (UP or DOWN); throws after `ms`. */
  waitState(name: string, state: 'UP' | 'DOWN', ms?: number): Promise<number>;
  /** haproxy's per-instance count of calls answered (`stot`, sessions to that server). */
  served(): Promise<Record<string, number>>;
  close(): Promise<void>;
}

export interface RigOptions {
  instances?: number;
  /** Added to each gateway's environment. */
  env?: Record<string, string>;
  /** Start only these many at first (the others stay down until started). */
  startCount?: number;
  log?: (line: string) => void;
}

/** Runs a command, throwing with its stderr. */
const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();

interface Network {
  isolation: 'netns' | 'loopback';
  host: string;
  addresses: string[];
  namespaces: (string | null)[];
  remove(): void;
}

/** A bridge with one namespace per instance (veth pairs), on a /24 of 10.213.x no interface uses yet. */
function makeNetwork(n: number): Network {
  const id = Math.floor(Math.random() * 0xffff)
    .toString(16)
    .padStart(4, '0');
  const used = run('ip', ['-o', '-4', 'addr']);
  let subnet = 0;
  for (let tries = 0; tries < 50 && !subnet; tries++) {
    const x = 1 + Math.floor(Math.random() * 254);
    if (!used.includes(` 10.213.${x}.`)) subnet = x;
  }
  const bridge = `qagb${id}`;
  const namespaces = Array.from({ length: n }, (_, i) => `qag${id}n${i + 1}`);
  const remove = () => {
    for (const ns of namespaces) {
      try {
        run('ip', ['netns', 'del', ns]); // takes its veth pair with it
      } catch {
        /* never made, or already gone */
      }
    }
    try {
      run('ip', ['link', 'del', bridge]);
    } catch {
      /* never made */
    }
  };
  try {
    if (!subnet) throw new Error('no free 10.213.x.0/24');
    const host = `10.213.${subnet}.1`;
    run('ip', ['link', 'add', bridge, 'type', 'bridge']);
    run('ip', ['addr', 'add', `${host}/24`, 'dev', bridge]);
    run('ip', ['link', 'set', bridge, 'up']);
    const addresses = namespaces.map((ns, i) => {
      const address = `10.213.${subnet}.${11 + i}`;
      const [outside, inside] = [`qagv${id}${i + 1}`, `qagp${id}${i + 1}`];
      run('ip', ['netns', 'add', ns]);
      run('ip', ['link', 'add', outside, 'type', 'veth', 'peer', 'name', inside]);
      run('ip', ['link', 'set', inside, 'netns', ns]);
      run('ip', ['link', 'set', outside, 'master', bridge]);
      run('ip', ['link', 'set', outside, 'up']);
      run('ip', ['-n', ns, 'link', 'set', inside, 'name', 'eth0']);
      run('ip', ['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
      run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      run('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
      return address;
    });
    return { isolation: 'netns', host, addresses, namespaces, remove };
  } catch {
    remove();
    return {
      isolation: 'loopback',
      host: '127.0.0.1',
      addresses: Array.from({ length: n }, (_, i) => `127.0.1.${11 + i}`),
      namespaces: namespaces.map(() => null),
      remove: () => undefined,
    };
  }
}

/** The TCP relay from the bridge to the machine's PostgreSQL and Redis (loopback only, trust auth). */
function relayConfig(host: string): string {
  return `defaults
    mode tcp
    timeout connect 2s
    # LISTEN and Redis subscriptions sit idle for long
    timeout client 1h
    timeout server 1h

listen store
    bind ${host}:5432
    server pg 127.0.0.1:5432

listen redis
    bind ${host}:6379
    server redis 127.0.0.1:6379
`;
}

export async function startRig(opts: RigOptions = {}): Promise<Rig> {
  const n = opts.instances ?? 3;
  const log = opts.log ?? (() => undefined);
  const net = makeNetwork(n);
  const work = mkdtempSync(join(tmpdir(), 'qag-scale-'));
  const children = new Set<ChildProcess>();
  let store: Awaited<ReturnType<typeof scratchDatabase>> | null = null;
  const lbHost = net.isolation === 'netns' ? net.host : '127.0.1.1';
  const lb = `http://${lbHost}:8080`;
  const statsUrl = `http://${lbHost}:8404/;csv`;

  const killAll = () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  };
  const onExit = () => {
    killAll();
    net.remove();
  };
  process.once('exit', onExit);

  const close = async () => {
    process.removeListener('exit', onExit);
    const gone = [...children].map((c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once('exit', r))));
    killAll();
    await Promise.all(gone);
    net.remove();
    await store?.drop().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  };

  try {
    store = await scratchDatabase('qag_scale');
    const storeUrl = `postgres://postgres@${net.host}:5432/${store.name}`;
    const haproxyArgs = ['-db', '-f', HAPROXY_CFG];
    if (net.isolation === 'netns') {
      writeFileSync(join(work, 'relay.cfg'), relayConfig(net.host));
      haproxyArgs.push('-f', join(work, 'relay.cfg'));
    }
    const haproxyEnv: Record<string, string> = { QAG_LISTEN: `${lbHost}:8080`, QAG_STATS: `${lbHost}:8404` };
    for (const [i, a] of net.addresses.entries()) haproxyEnv[`QAG_GATEWAY${i + 1}`] = `${a}:${GATEWAY_PORT}`;
    const haproxy = spawn('haproxy', haproxyArgs, { env: { ...process.env, ...haproxyEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(haproxy);
    let haproxyOut = '';
    haproxy.stdout.on('data', (d) => (haproxyOut += d));
    haproxy.stderr.on('data', (d) => (haproxyOut += d));
    await waitFor(
      async () => (await fetch(statsUrl)).ok,
      5000,
      () => `haproxy did not start:\n${haproxyOut}`,
    );

    const instances = net.addresses.map((address, i) =>
      gatewayInstance({
        name: `gateway${i + 1}`,
        address,
        netns: net.namespaces[i],
        home: join(work, `gateway${i + 1}`),
        env: {
          QUERYAPIGATE_DATABASE_URL: storeUrl,
          QUERYAPIGATE_REDIS_URL: `redis://${net.host}:6379`,
          QUERYAPIGATE_API_KEY: ADMIN_KEY,
          QUERYAPIGATE_WORKERS: '1',
          QUERYAPIGATE_METADATA_CACHE_TTL: '5',
          QUERYAPIGATE_TRUST_PROXY: '1',
          QUERYAPIGATE_HISTORY_FLUSH_INTERVAL: '0.05',
          ...opts.env,
        },
        children,
      }),
    );
    // The first creates the store's tables; the others then start side by side.
    const first = opts.startCount ?? n;
    if (first > 0) await instances[0].start();
    await Promise.all(instances.slice(1, first).map((g) => g.start()));

    const states = async () => {
      const csv = await (await fetch(statsUrl)).text();
      const [header, ...lines] = csv.trim().split('\n');
      const cols = header.replace(/^# /, '').split(',');
      const out: Record<string, string> = {};
      for (const line of lines) {
        const f = line.split(',');
        if (f[cols.indexOf('pxname')] === 'gateways' && f[cols.indexOf('svname')].startsWith('gateway')) {
          out[f[cols.indexOf('svname')]] = f[cols.indexOf('status')];
          out[`${f[cols.indexOf('svname')]}.stot`] = f[cols.indexOf('stot')];
        }
      }
      return out;
    };
    const rig: Rig = {
      lb,
      instances,
      serviceHost: net.host,
      storeDatabase: store.name,
      isolation: net.isolation,
      async states() {
        const s = await states();
        return Object.fromEntries(Object.entries(s).filter(([k]) => !k.endsWith('.stot')));
      },
      async served() {
        const s = await states();
        return Object.fromEntries(instances.map((g) => [g.name, Number(s[`${g.name}.stot`])]));
      },
      async waitState(name, state, ms = 10_000) {
        const t0 = performance.now();
        await waitFor(
          async () => (await states())[name] === state,
          ms,
          async () => `haproxy never saw ${name} ${state}: ${JSON.stringify(await states())}`,
        );
        return performance.now() - t0;
      },
      close,
    };
    for (const g of instances.slice(0, first)) await rig.waitState(g.name, 'UP');
    log(`rig: ${n} instances (${net.isolation}) at ${net.addresses.join(', ')}, haproxy at ${lb}`);
    return rig;
  } catch (e) {
    await close();
    throw e;
  }
}

function gatewayInstance(o: {
  name: string;
  address: string;
  netns: string | null;
  home: string;
  env: Record<string, string>;
  children: Set<ChildProcess>;
}): Instance {
  let child: ChildProcess | null = null;
  let out = '';
  let exit: Promise<number | null> = Promise.resolve(null);
  const url = `http://${o.address}:${GATEWAY_PORT}`;
  return {
    name: o.name,
    url,
    async start() {
      const env = { ...process.env, ...o.env, QUERYAPIGATE_HOME: o.home, QUERYAPIGATE_HOST: o.address, QUERYAPIGATE_PORT: String(GATEWAY_PORT) };
      // `ip netns exec` execs node itself, so the child's pid is the gateway's (signals reach it).
      const [cmd, args] = o.netns ? ['ip', ['netns', 'exec', o.netns, process.execPath, MAIN, 'serve']] : [process.execPath, [MAIN, 'serve']];
      const c = spawn(cmd, args as string[], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      child = c;
      o.children.add(c);
      out = '';
      c.stdout?.on('data', (d) => (out += d));
      c.stderr?.on('data', (d) => (out += d));
      exit = new Promise((r) => c.once('exit', (code) => r(code)));
      await waitFor(
        async () => {
          if (c.exitCode !== null) throw new Error(`${o.name} exited:\n${out}`);
          return /listening on/.test(out);
        },
        30_000,
        () => `${o.name} did not start:\n${out}`,
      );
    },
    signal(s) {
      child?.kill(s);
    },
    exited: () => exit,
    running: () => child !== null && child.exitCode === null && child.signalCode === null,
    pid: () => child?.pid ?? 0,
    output: () => out,
  };
}

async function waitFor(ok: () => Promise<boolean>, ms: number, why: () => string | Promise<string>): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      if (await ok()) return;
    } catch (e) {
      if (e instanceof Error && / exited:/.test(e.message)) throw e;
    }
    if (Date.now() > until) throw new Error(await why());
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Sums a metric's samples whose labels include every given pair (Prometheus text). */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/**
 * Makes a key on the first instance for `queries`, calls `path` with it on every instance (so each
 * has its row cached), revokes it on the second, and returns how long after the revocation's answer
 * each instance first refused it (401), in ms (Infinity for one still serving it after `giveUpMs`);
 * and the key's secret.
 */
export async function revocationDelays(
  r: Rig,
  o: { name: string; queries: string[]; path: string; giveUpMs: number },
): Promise<{ secret: string; delays: number[] }> {
  const [made, revoker] = [r.instances[0], r.instances[1]];
  const k = await request(made.url, 'POST', '/api/v1/api-keys', { body: { name: o.name, queries: o.queries, connections: [] } });
  if (k.status !== 201) throw new Error(`key: ${k.status} ${k.text}`);
  const secret = k.json.secret as string;
  for (const g of r.instances) {
    for (let i = 0; i < 3; i++) {
      const a = await request(g.url, 'GET', o.path, { key: secret });
      if (a.status !== 200) throw new Error(`${g.name} before the revocation: ${a.status} ${a.text}`);
    }
  }
  const revoked = await request(revoker.url, 'PATCH', `/api/v1/api-keys/${o.name}`, { body: { active: false } });
  if (revoked.status !== 200) throw new Error(`revoke: ${revoked.status} ${revoked.text}`);
  const t0 = performance.now();
  const delays = await Promise.all(
    r.instances.map(async (g) => {
      for (;;) {
        const a = await request(g.url, 'GET', o.path, { key: secret });
        if (a.status === 401) return performance.now() - t0;
        if (a.status !== 200) throw new Error(`${g.name} after the revocation: ${a.status} ${a.text}`);
        if (performance.now() - t0 > o.giveUpMs) return Number.POSITIVE_INFINITY;
      }
    }),
  );
  return { secret, delays };
}

export interface Load {
  /** Answers by status (0: no answer at all). */
  statuses: Record<string, number>;
  calls: Array<{ status: number; start: number; end: number; error?: string }>;
  stop(): Promise<void>;
}

/** `callers` loops calling `path()` through `base` until stopped; every call's status and times kept. */
export function startLoad(
  base: string,
  o: { callers: number; key: string; path: (i: number) => string; method?: 'GET' | 'POST'; body?: (i: number) => unknown; tag?: string },
): Load {
  let stopping = false;
  const calls: Load['calls'] = [];
  const statuses: Record<string, number> = {};
  let i = 0;
  const loop = async () => {
    while (!stopping) {
      const n = i++;
      const start = performance.now();
      let status = 0;
      let error: string | undefined;
      try {
        status = (await request(base, o.method ?? 'GET', o.path(n), { key: o.key, body: o.body?.(n), headers: { 'X-Request-Id': `${o.tag ?? 'load'}-${n}` } }))
          .status;
      } catch (e) {
        error = String((e as Error).cause ?? e);
      }
      calls.push({ status, start, end: performance.now(), error });
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  };
  const loops = Array.from({ length: o.callers }, loop);
  return {
    statuses,
    calls,
    async stop() {
      stopping = true;
      await Promise.all(loops);
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface KillOutcome {
  instance: string;
  /** Answers by status, per method, over the whole load. */
  get: Record<string, number>;
  post: Record<string, number>;
  /** Calls that failed: those in flight on it, and POSTs haproxy sent it (on a connection it kept
   * open to it) in the instant before it saw the connection close. */
  failed: number;
  /** From SIGKILL until haproxy marked it DOWN; from its start again until UP. */
  downMs: number;
  upMs: number;
  /** Failures among calls started once haproxy had marked it DOWN. */
  failedAfterDown: number;
  /** Each failure: status, method, start and end in ms from the kill, the client's error. */
  failures: Array<{ status: number; method: string; start: number; end: number; error?: string }>;
}

/**
 * One instance killed with SIGKILL under a GET and a POST load through haproxy, then started again.
 * GETs in flight on it are retried by haproxy on another instance; POSTs are not (they might have
 * written), so those in flight on it are what the kill costs.
 */
export async function killUnderLoad(
  rig: Rig,
  o: { key: string; index: number; callers: number; path: (i: number) => string; body: (i: number) => unknown; holdMs: number },
): Promise<KillOutcome> {
  const g = rig.instances[o.index];
  const get = startLoad(rig.lb, { callers: o.callers, key: o.key, path: o.path, tag: 'kill-get' });
  const post = startLoad(rig.lb, { callers: o.callers, key: o.key, path: () => o.path(0).split('?')[0], method: 'POST', body: o.body, tag: 'kill-post' });
  await sleep(o.holdMs);
  const killedAt = performance.now();
  g.signal('SIGKILL');
  await g.exited();
  await rig.waitState(g.name, 'DOWN');
  const downMs = performance.now() - killedAt;
  const downAt = performance.now();
  await sleep(o.holdMs);
  const startedAt = performance.now();
  await g.start();
  await rig.waitState(g.name, 'UP');
  const upMs = performance.now() - startedAt;
  await sleep(o.holdMs);
  await Promise.all([get.stop(), post.stop()]);
  const calls = [...get.calls, ...post.calls];
  const failedCalls = calls.filter((c) => c.status !== 200);
  return {
    instance: g.name,
    get: get.statuses,
    post: post.statuses,
    failed: failedCalls.length,
    downMs,
    upMs,
    failedAfterDown: calls.filter((c) => c.start >= downAt && c.status !== 200).length,
    failures: failedCalls.map((c) => ({
      status: c.status,
      method: get.calls.includes(c) ? 'GET' : 'POST',
      start: Math.round(c.start - killedAt),
      end: Math.round(c.end - killedAt),
      error: c.error,
    })),
  };
}

export interface RollingOutcome {
  /** Answers by status of the load through haproxy over the whole restart. */
  statuses: Record<string, number>;
  calls: number;
  steps: Array<{
    instance: string;
    /** /health on a connection opened before SIGTERM, asked during the drain. */
    healthWhileDraining: number;
    /** The call in flight directly on the instance when it got SIGTERM. */
    inFlight: number;
    exitCode: number | null;
    /** From SIGTERM until haproxy marked it DOWN, until it exited; from its start again until UP. */
    downMs: number;
    exitMs: number;
    upMs: number;
  }>;
}

/**
 * Every instance in turn: SIGTERM with a slow call in flight on it (`slowPath`), /health asked while it
 * drains, its exit, its start again; all under a GET load through haproxy that must lose nothing.
 */
export async function rollingRestart(rig: Rig, o: { key: string; callers: number; path: (i: number) => string; slowPath: string }): Promise<RollingOutcome> {
  const load = startLoad(rig.lb, { callers: o.callers, key: o.key, path: o.path, tag: 'rolling' });
  const steps: RollingOutcome['steps'] = [];
  try {
    await sleep(300);
    for (const g of rig.instances) {
      const inFlight = request(g.url, 'GET', o.slowPath, { key: o.key });
      await sleep(100);
      // A second connection, idle and kept alive (the in-flight call holds the first): the drain
      // closes the listener at once, so only an open connection can still ask /health.
      assertStatus(await request(g.url, 'GET', '/health', { key: null }), 200);
      const termAt = performance.now();
      g.signal('SIGTERM');
      await sleep(20);
      const health = await request(g.url, 'GET', '/health', { key: null }).then(
        (r) => r.status,
        () => 0,
      );
      const [downMs, answer, exitCode] = await Promise.all([
        rig.waitState(g.name, 'DOWN').then(() => performance.now() - termAt),
        inFlight.then((r) => r.status),
        g.exited(),
      ]);
      const exitMs = performance.now() - termAt;
      const startedAt = performance.now();
      await g.start();
      await rig.waitState(g.name, 'UP');
      steps.push({ instance: g.name, healthWhileDraining: health, inFlight: answer, exitCode, downMs, exitMs, upMs: performance.now() - startedAt });
    }
    await sleep(300);
  } finally {
    await load.stop();
  }
  return { statuses: load.statuses, calls: load.calls.length, steps };
}

function assertStatus(r: { status: number; text: string }, status: number) {
  if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${r.text}`);
}
