// The event log's append alone, build against build: CPU of this process a run for EventLog.appendRuns called back to
// back with batches of 500 runs as the seeds' account lookup makes them (one query, one key, a request id each), on a
// SQLite file store and, with --pg, a fresh PostgreSQL database (its backend's CPU too, when the server is local). The
// builds (copies of dist/ inside this worktree) take turns, the order flipped each round.
//
//   node dist/bench/eventAppend.js --dist dist-before,dist [--rounds 5] [--batches 320] [--pace 25] [--batch 500] [--pg postgres://postgres@127.0.0.1:5432/postgres] [--suffix x]
//
// Results go to bench/results/eventappend-<date>[-<suffix>]/ (results.jsonl + README.md).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import type { RunRecord } from '../src/contract/messages.js';
import { fmt, median, writeResults } from './gateway.js';
import { BackendCpu } from './dbCpu.js';

const { values: args } = parseArgs({
  options: {
    dist: { type: 'string', default: 'dist' },
    rounds: { type: 'string', default: '5' },
    batches: { type: 'string', default: '320' },
    pg: { type: 'string' },
    /** Milliseconds between appends (0: back to back). The recorder appends a page of 500 runs every 25 ms at 20,000 calls a second. */
    pace: { type: 'string', default: '0' },
    /** Runs an append (the recorder's: 500 on a thread that serves calls, 2,000 on its own). */
    batch: { type: 'string', default: '500' },
    suffix: { type: 'string' },
  },
});
const BUILDS = args.dist.split(',');
const ROUNDS = Number(args.rounds);
const BATCHES = Number(args.batches);
const BATCH = Number(args.batch);
const PACE_MS = Number(args.pace);

const lookupRuns = (): RunRecord[] =>
  Array.from({ length: BATCH }, (_, i) => ({
    query: 'account',
    version: 1,
    kind: 'saved',
    executed_at: new Date().toISOString().replace('T', ' ').slice(0, 23),
    status: 'success',
    connection_name: 'bench',
    key_name: 'bench-key',
    request_id: randomBytes(12).toString('hex'),
    rows: 1,
    duration_ms: i % 3,
    serialization_ms: (i % 2) / 10,
    transport: 'rest',
  }));

interface Row {
  round: number;
  build: string;
  engine: 'sqlite' | 'postgres';
  runs: number;
  client_us_per_run: number;
  server_us_per_run: number | null;
}

/** A store of `build`'s modules: its SqlDb, migrated, and how to drop it. */
async function freshStore(build: string, engine: Row['engine']) {
  const dist = resolve(build);
  const sql = await import(`${dist}/src/store/sql.js`);
  const { migrate } = await import(`${dist}/src/store/migrations.js`);
  const { EventLog } = await import(`${dist}/src/store/events.js`);
  if (engine === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'qag-append-'));
    const db = sql.openSqlite(join(dir, 'store.db'));
    await migrate(db);
    const drop = async () => {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    };
    return { db, EventLog, server: null, drop };
  }
  const name = `qag_append_${process.pid}_${Date.now()}`;
  const admin = postgres(args.pg!, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const url = args.pg!.replace(/\/[^/]*$/, `/${name}`);
  const db = sql.openPostgres(url, { max: 2 });
  await migrate(db);
  const backends = new BackendCpu(admin, [name]);
  return {
    db,
    EventLog,
    server: {
      start: () => backends.measured.start(),
      /** CPU seconds of the database's backends since start; null when they are not this machine's. */
      end: async () => {
        await backends.measured.end();
        return backends.seconds?.get(name) ?? null;
      },
    },
    drop: async () => {
      await db.close();
      await admin.unsafe(`DROP DATABASE ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}

async function measure(round: number, build: string, engine: Row['engine']): Promise<Row> {
  const store = await freshStore(build, engine);
  const log = await store.EventLog.open(store.db, { retentionS: 3600 });
  const batches = Array.from({ length: 40 }, lookupRuns);
  for (let i = 0; i < 10; i++) await log.appendRuns(batches[i]); // warm-up: the segment's table, JIT, the statements
  await store.server?.start();
  const before = process.cpuUsage();
  for (let i = 0; i < BATCHES; i++) {
    await log.appendRuns(batches[i % batches.length]);
    if (PACE_MS > 0) await new Promise((r) => setTimeout(r, PACE_MS));
  }
  const used = process.cpuUsage(before);
  const server = (await store.server?.end()) ?? null;
  await store.drop();
  const runs = BATCHES * BATCH;
  const per = (us: number) => Math.round((us / runs) * 100) / 100;
  return { round, build, engine, runs, client_us_per_run: per(used.user + used.system), server_us_per_run: server === null ? null : per(server * 1e6) };
}

const rows: Row[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  for (const engine of args.pg ? (['sqlite', 'postgres'] as const) : (['sqlite'] as const)) {
    for (const build of round % 2 ? BUILDS : [...BUILDS].reverse()) {
      const row = await measure(round, build, engine);
      rows.push(row);
      console.log(JSON.stringify(row));
    }
  }
}

const groups = [...new Set(rows.map((r) => `${r.engine}\u0000${r.build}`))];
const cell = (xs: Array<number | null>) => {
  const v = xs.filter((x): x is number => x !== null);
  return v.length ? `${fmt(median(v), 2)} (${v.map((x) => fmt(x, 2)).join(' / ')})` : '-';
};
const table = groups.map((k) => {
  const g = rows.filter((r) => `${r.engine}\u0000${r.build}` === k);
  return `| ${g[0].engine} | ${g[0].build} | ${cell(g.map((r) => r.client_us_per_run))} | ${cell(g.map((r) => r.server_us_per_run))} |`;
});
const dir = writeResults(
  'eventappend',
  rows,
  [
    "# The event log's append alone (bench/eventAppend.ts)",
    '',
    `Run on ${new Date().toISOString()} with \`node dist/bench/eventAppend.js --dist ${args.dist} --rounds ${ROUNDS} --batches ${BATCHES}${BATCH !== 500 ? ` --batch ${BATCH}` : ''}${PACE_MS ? ` --pace ${PACE_MS}` : ''}${args.pg ? ` --pg ${args.pg}` : ''}\`.`,
    `EventLog.appendRuns called ${PACE_MS ? `every ${PACE_MS} ms` : 'back to back'}, ${fmt(BATCHES)} batches of ${BATCH} runs as the seeds' account lookup makes them, after 10 batches of`,
    "warm-up, on a fresh store each time; CPU of this process a run (the store's JavaScript, the driver and, on SQLite, SQLite itself) and of",
    "the PostgreSQL backends a run. Median (each round's, in order); builds take turns, the order flipped each round.",
    '',
    '| store | build | this process µs/run | PostgreSQL µs/run |',
    '|---|---|---|---|',
    ...table,
    '',
  ].join('\n'),
  args.suffix,
);
console.log(`results in ${dir}`);
