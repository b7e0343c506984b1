// Many instances as one service (issue 19): the scale-out test's topology (test/scaleoutRig.ts: three
// gateways in network namespaces, haproxy running deploy/scale-out/haproxy.cfg, one PostgreSQL store,
// one Redis), measured. Throughput of the lookup through haproxy against 1, 2 and 3 instances (wrk,
// interleaved rounds), the store connections, Redis commands and event-log rows per call; then an
// instance killed with SIGKILL and a rolling restart, each under load: answers by status and the time
// haproxy takes to see an instance go and come back. Writes bench/results/scaleout-<date>/.
//
//   node dist/bench/scaleout.js [--duration 10] [--connections 32] [--rounds 2] [--workers 1] [--revocations 10]
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { request, scratchDatabase } from '../test/helpers.js';
import { killUnderLoad, type Rig, revocationDelays, rollingRestart, startRig } from '../test/scaleoutRig.js';
import { countEvents, fmt, median, range, writeResults } from './gateway.js';
import { runLoad } from './load.js';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '32' },
    rounds: { type: 'string', default: '2' },
    workers: { type: 'string', default: '1' },
    revocations: { type: 'string', default: '10' },
  },
});
const DURATION = Number(values.duration);
const CONNECTIONS = Number(values.connections);
const ROUNDS = Number(values.rounds);
const REVOCATIONS = Number(values.revocations);
const log = (line: string) => process.stderr.write(`${line}\n`);
const MODEL = `## What the design needs at 10 and 100 instances (a model)

No machine here shows 10 or 100 instances; these follow from the code and the figures above. Per
instance: E executor threads (\`QUERYAPIGATE_WORKERS\`), R calls a second.

| Need | Per instance | 10 instances | 100 instances |
|---|---|---|---|
| Store connections | acceptor 2 + 1 per executor + recorder 1 + LISTEN 1 (none with Redis), ≈ E + 4 | ≈ 10(E+4): 50 at E = 1 | ≈ 100(E+4): 500 at E = 1, past PostgreSQL's default \`max_connections\` (100): raise it, or put PgBouncer (transaction mode) in front of the store |
| Data-source connections | up to \`QUERYAPIGATE_POOL_SIZE\` (8) per executor per connection | 80 E per data source | 800 E per data source: lower the pool size, or a pooler in front of the database |
| Change notices (a management write) | 1 PUBLISH (Redis) or NOTIFY; each instance clears its caches and re-reads ≈ 3 rows per executor on its next calls | 10 deliveries, ≈ 30 E store reads | 100 deliveries, ≈ 300 E reads: negligible while changes are rare (a few a minute); a burst of changes is one clear per change |
| Store reads per call | 0 with the metadata cache on (3 with it off: key, query, connection) | 0 (30 R off) | 0 (300 R off): with the cache off the store is the bottleneck long before 100 instances |
| Redis round trips per call | 1 EVALSHA per rate limit that applies (key, per-query, client) ; 0 without limits; response-cache reads for versions with \`cache_ttl\` | 10 R per limit | 100 R per limit: at 100 instances × 1,000 calls/s, 100,000 commands/s, about one Redis core; shard by key or use Redis Cluster beyond |
| Event log writes | R rows a second, in one batched INSERT per flush interval (1 s) | 10 R rows/s, 10 batches/s | 100 R rows/s, 100 batches/s: at R = 1,000, 100,000 rows/s; the log is append-only segments dropped whole at retention, so the cost is the INSERT rate and WAL (≈ 200 bytes a run, ≈ 20 MB/s at that rate): size the store for it, or raise the flush interval so batches are larger |
| /metrics | scraped per instance (≈ 30 series per key and query) | 10 targets | 100 targets: the \`key\` label multiplies series by keys; drop or aggregate it at scrape time for many keys |
`;

const data = await scratchDatabase('qag_scalebench_data');
await data.sql.unsafe('CREATE TABLE scale_items (id int PRIMARY KEY, name text NOT NULL)');
await data.sql.unsafe("INSERT INTO scale_items SELECT i, 'item ' || i FROM generate_series(1, 1000) i");
const rig = await startRig({ env: { QUERYAPIGATE_WORKERS: values.workers }, log });
const rows: object[] = [];
try {
  const [g1] = rig.instances;
  const admin = async (method: string, path: string, body: unknown) => {
    const r = await request(g1.url, method, path, { body });
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`);
    return r.json;
  };
  await admin('POST', '/api/v1/connections', { name: 'data', db: 'postgres', host: rig.serviceHost, port: 5432, database: data.name, user: 'postgres' });
  await admin('POST', '/api/v1/queries', {
    name: 'item',
    description: 'one item',
    connection_name: 'data',
    sql: 'SELECT id, name FROM scale_items WHERE id = :id',
    parameters: { id: { type: 'int', required: true } },
    publish: true,
  });
  await admin('POST', '/api/v1/queries', {
    name: 'nap',
    description: 'slow',
    connection_name: 'data',
    sql: 'SELECT pg_sleep(0.8)::text AS slept',
    publish: true,
  });
  // A rate limit far above the load: every call takes its token from Redis, as a governed key's do.
  const suffix = Date.now().toString(36);
  const key = (await admin('POST', '/api/v1/api-keys', { name: `bench_${suffix}`, queries: ['item', 'nap'], connections: [], rate_limit: '100000000/minute' }))
    .secret;

  // ---- throughput against 1, 2, 3 instances (interleaved: 1 2 3 3 2 1 ...) --------------------
  const order: number[] = [];
  for (let r = 0; r < ROUNDS; r++) order.push(...(r % 2 ? [3, 2, 1] : [1, 2, 3]));
  const throughput: Array<{ instances: number; rps: number; p50: number; p99: number; errors: number; non2xx: number }> = [];
  const pg = (q: string) => execFileSync('psql', ['-h', '127.0.0.1', '-U', 'postgres', '-d', 'postgres', '-Atqc', q], { encoding: 'utf8' }).trim();
  const redisCommands = () =>
    Number(/total_commands_processed:(\d+)/.exec(execFileSync('redis-cli', ['-h', '127.0.0.1', 'info', 'stats'], { encoding: 'utf8' }))?.[1]);
  const usage: Array<{ instances: number; cores: number; rssMb: number }> = [];
  const perCall: Array<{ instances: number; storeConnections: number; dataConnections: number; redisPerCall: number; eventsPerCall: number }> = [];
  for (const n of order) {
    await runWith(rig, n);
    const running = rig.instances.filter((g) => g.running());
    const load = { randRegexUrl: `${rig.lb}/q/item\\?id=[1-9][0-9]{0,2}`, connections: CONNECTIONS, headers: { 'X-API-Key': key } };
    // The warm-up on its own: its calls must not count in the per-call figures below.
    await runLoad({ ...load, duration: 2 });
    await new Promise((r) => setTimeout(r, 500)); // its last batches of runs
    const cpu0 = running.map((g) => cpuSeconds(g.pid()));
    const redis0 = redisCommands();
    const events0 = await countEvents(rig.storeDatabase);
    const res = await runLoad({ ...load, duration: DURATION });
    const redisPerCall = (redisCommands() - redis0) / res.requests;
    // Cores each instance kept busy over the measured run.
    const cores = running.map((g, i) => (cpuSeconds(g.pid()) - cpu0[i]) / DURATION);
    const rssMb = running.map((g) => rss(g.pid()));
    await new Promise((r) => setTimeout(r, 500)); // the last batches of runs
    const eventsPerCall = ((await countEvents(rig.storeDatabase)) - events0) / res.requests;
    const conns = (db: string) => Number(pg(`SELECT count(*) FROM pg_stat_activity WHERE datname = '${db}'`));
    const row = { instances: n, rps: res.rps, p50: res.p50_ms, p99: res.p99_ms, errors: res.errors, non2xx: res.non2xx };
    throughput.push(row);
    perCall.push({ instances: n, storeConnections: conns(rig.storeDatabase), dataConnections: conns(data.name), redisPerCall, eventsPerCall });
    rows.push({ kind: 'throughput', ...row, requests: res.requests, loadavg: loadavg()[0], cores, rssMb, ...perCall.at(-1) });
    usage.push(...cores.map((c, i) => ({ instances: n, cores: c, rssMb: rssMb[i] })));
    log(`${n} instance(s): ${fmt(res.rps)} calls/s, p50 ${res.p50_ms} ms, p99 ${res.p99_ms} ms, ${res.non2xx} non-2xx, ${res.errors} errors`);
    if (n === 1) {
      // The same instance without haproxy in front: what the load balancer's hop costs here.
      const direct = await runLoad({
        randRegexUrl: `${g1.url}/q/item\\?id=[1-9][0-9]{0,2}`,
        duration: DURATION,
        connections: CONNECTIONS,
        headers: { 'X-API-Key': key },
        warmup: 2,
      });
      const d = { instances: 0, rps: direct.rps, p50: direct.p50_ms, p99: direct.p99_ms, errors: direct.errors, non2xx: direct.non2xx };
      throughput.push(d);
      rows.push({ kind: 'throughput-direct', ...d, requests: direct.requests, loadavg: loadavg()[0] });
      log(`1 instance, direct: ${fmt(direct.rps)} calls/s`);
    }
  }
  await runWith(rig, 3);

  // ---- revocation: how long after the answer to a revoke each instance refuses the key -----------
  const revocations: number[][] = [];
  for (let i = 0; i < REVOCATIONS; i++) {
    const { delays } = await revocationDelays(rig, { name: `revoke_${suffix}_${i}`, queries: ['item'], path: '/q/item?id=1', giveUpMs: 6000 });
    revocations.push(delays);
    rows.push({ kind: 'revocation', delays });
    await new Promise((r) => setTimeout(r, 200)); // apart, as an administrator's changes are
  }
  log(`revocation: ${revocations.map((d) => d.map((ms) => ms.toFixed(0)).join('/')).join(' ')} ms`);

  // ---- failures under load -------------------------------------------------------------------
  const kill = await killUnderLoad(rig, {
    key,
    index: 2,
    callers: 4,
    path: (i) => `/q/item?id=${(i % 1000) + 1}`,
    body: (i) => ({ params: { id: (i % 1000) + 1 } }),
    holdMs: 3000,
  });
  rows.push({ kind: 'sigkill', ...kill });
  log(`SIGKILL: ${JSON.stringify(kill)}`);
  const rolling = await rollingRestart(rig, { key, callers: 8, path: (i) => `/q/item?id=${(i % 1000) + 1}`, slowPath: '/q/nap' });
  rows.push({ kind: 'rolling', ...rolling });
  log(`rolling: ${JSON.stringify(rolling)}`);

  const dir = writeResults('scaleout', rows, report(rig, throughput, perCall, usage, revocations, kill, rolling));
  log(`results in ${dir}`);
} finally {
  await rig.close();
  await data.drop();
}

/** Exactly the first `n` instances running and UP in haproxy; the others stopped (SIGTERM) and DOWN. */
async function runWith(r: Rig, n: number) {
  for (const [i, g] of r.instances.entries()) {
    if (i >= n && g.running()) {
      g.signal('SIGTERM');
      await g.exited();
      await r.waitState(g.name, 'DOWN');
    } else if (i < n && !g.running()) {
      await g.start();
      await r.waitState(g.name, 'UP');
    }
  }
}

/** utime+stime of a process, in seconds (/proc/<pid>/stat, clock ticks of 1/100 s). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Resident memory of a process, in MB. */
function rss(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;
}

function report(
  r: Rig,
  throughput: Array<{ instances: number; rps: number; p50: number; p99: number; errors: number; non2xx: number }>,
  perCall: Array<{ instances: number; storeConnections: number; dataConnections: number; redisPerCall: number; eventsPerCall: number }>,
  usage: Array<{ instances: number; cores: number; rssMb: number }>,
  revocations: number[][],
  kill: Awaited<ReturnType<typeof killUnderLoad>>,
  rolling: Awaited<ReturnType<typeof rollingRestart>>,
): string {
  const by = (n: number) => throughput.filter((t) => t.instances === n);
  const one = median(by(1).map((t) => t.rps));
  const lines = [
    '| Instances behind haproxy | Calls/s | vs 1 | p50 ms | p99 ms | Non-2xx | Socket errors | Store connections | Data connections | Redis commands / call | Event rows / call |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  const direct = by(0);
  lines.push(
    `| 1, called directly (no haproxy) | ${range(direct.map((x) => x.rps))} | ${fmt(median(direct.map((x) => x.rps)) / one, 2)}x | ${range(
      direct.map((x) => x.p50),
      2,
    )} | ${range(
      direct.map((x) => x.p99),
      2,
    )} | ${direct.reduce((a, x) => a + x.non2xx, 0)} | ${direct.reduce((a, x) => a + x.errors, 0)} | | | | |`,
  );
  for (const n of [1, 2, 3]) {
    const t = by(n);
    const p = perCall.filter((x) => x.instances === n);
    lines.push(
      `| ${n} | ${range(t.map((x) => x.rps))} | ${fmt(median(t.map((x) => x.rps)) / one, 2)}x | ${range(
        t.map((x) => x.p50),
        2,
      )} | ${range(
        t.map((x) => x.p99),
        2,
      )} | ${t.reduce((a, x) => a + x.non2xx, 0)} | ${t.reduce((a, x) => a + x.errors, 0)} | ${range(p.map((x) => x.storeConnections))} | ${range(p.map((x) => x.dataConnections))} | ${range(
        p.map((x) => x.redisPerCall),
        2,
      )} | ${range(
        p.map((x) => x.eventsPerCall),
        2,
      )} |`,
    );
  }
  const statuses = (s: Record<string, number>) =>
    Object.entries(s)
      .map(([k, v]) => `${k === '0' ? 'no answer' : k}: ${fmt(v)}`)
      .join(', ');
  return `# Scale-out: three gateways behind haproxy (${new Date().toISOString().slice(0, 10)})

\`\`\`bash
npm run build --silent && node dist/bench/scaleout.js --duration ${DURATION} --connections ${CONNECTIONS} --rounds ${ROUNDS} --workers ${values.workers} --revocations ${REVOCATIONS}
\`\`\`

The topology of \`deploy/scale-out/\` as processes (\`test/scaleoutRig.ts\`, the scale-out test's rig):
three gateways (\`QUERYAPIGATE_WORKERS=${values.workers}\`, metadata cache 5 s, Redis rate limits), each
${r.isolation === 'netns' ? 'in its own network namespace with its own address on a bridge' : 'on its own 127.0.1.x address (no network namespaces)'}, haproxy 2.6 with
\`deploy/scale-out/haproxy.cfg\` itself in front, one PostgreSQL store (a fresh database) and one Redis,
reached from the namespaces through a TCP relay on the bridge. The call is a primary-key lookup on
PostgreSQL (\`SELECT id, name FROM scale_items WHERE id = :id\`, 1,000 rows) with a key whose rate
limit is far above the load, so every call takes a token from Redis. wrk, ${CONNECTIONS} connections,
${DURATION} s after a 2 s warm-up (not counted in any figure), ${ROUNDS} interleaved rounds per count (median, min-max).

**The machine has 2 cores, shared by wrk, haproxy, every gateway, PostgreSQL, Redis and the other
engineers' work on it**: the figures are rough, and more instances cannot add cores here. They show
that the topology works and what it costs, not how it scales on separate hosts.

${lines.join('\n')}

Each instance kept ${range(
    usage.map((u) => u.cores),
    2,
  )} cores busy (utime+stime over the run, every
round) and held ${range(usage.map((u) => u.rssMb))} MB resident after it: the Helm chart's requests
(\`deploy/helm/queryapigate/values.yaml\`) are sized from these.

Store and data connections are PostgreSQL's \`pg_stat_activity\` for the store and the data database
with that many instances running; Redis commands are \`total_commands_processed\` over the run (the
machine's Redis, so other engineers' tests may add a few; the rate limit's EVALSHA counts 4, itself
and the TIME, GET and SET its script runs: one round trip a call); event rows are those written to the
store's event log per call.

## Revocation

${revocations.length} keys, one after another (200 ms apart): each made on ${r.instances[0].name}, called 3 times on every
instance (its row cached there, metadata cache 5 s), then revoked on ${r.instances[1].name}; from the revoke's answer,
each instance called in a loop until it refused the key (401). The scale-out test asserts that this is the
change notice at work (every instance under 1 s, against the 5 s a cached row would last); the delay
itself is this table (ms):

| Instance | Median | Max | Every revocation |
|---|---|---|---|
${r.instances
  .map((g, i) => {
    const d = revocations.map((x) => x[i]);
    return `| ${g.name}${i === 1 ? ' (revoked on)' : ''} | ${fmt(median(d), 1)} | ${fmt(Math.max(...d), 1)} | ${d.map((x) => x.toFixed(0)).join(', ')} |`;
  })
  .join('\n')}
| all three (the slowest of each revocation) | ${fmt(median(revocations.map((x) => Math.max(...x))), 1)} | ${fmt(Math.max(...revocations.flat()), 1)} | |

## Failures under load

**SIGKILL** of ${kill.instance} under a GET and a POST load (4 callers each) through haproxy, 3 s
before and after: GET ${statuses(kill.get)}; POST ${statuses(kill.post)}. Failed: ${kill.failed}
(each a POST in flight on it, or sent to it on a kept connection as it died: ${kill.failures.map((f) => `${f.method} ${f.start} ms → ${f.end} ms`).join('; ') || 'none'}),
none after haproxy marked it DOWN, ${fmt(kill.downMs)} ms after the kill (2 failed checks, 0.5 s apart). Started again, it was
UP ${fmt(kill.upMs)} ms later (the process's start on a busy machine, then 2 good checks).

**Rolling restart** (each instance in turn: SIGTERM with an 0.8 s call in flight on it, its exit,
its start again) under a GET load (8 callers) through haproxy: ${fmt(rolling.calls)} calls, ${statuses(rolling.statuses)}.

| Instance | /health while draining | Call in flight | Exit code | DOWN after (ms) | Exited after (ms) | UP again after start (ms) |
|---|---|---|---|---|---|---|
${rolling.steps.map((s) => `| ${s.instance} | ${s.healthWhileDraining} | ${s.inFlight} | ${s.exitCode} | ${fmt(s.downMs)} | ${fmt(s.exitMs)} | ${fmt(s.upMs)} |`).join('\n')}

${MODEL}
`;
}
