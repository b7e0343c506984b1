// What a postgres.js lookup promotes to V8's old generation, alone: 32 loops of the account lookup over
// 8 `max: 1` clients (as the floor and the gateway spread them), in a child process under
// --trace-gc-nvp, by the way each query is made. Bytes promoted by young-generation collections,
// divided by the queries run, tell which pattern keeps a query alive past a collection (the acceptor
// promotes ~0.8 KB a call: ARCHITECTURE.md, "Measured traps").
//   npm run build && node dist/bench/promotion.js [--seconds 6] [--rounds 2]
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { fmt, median, range, writeResults } from './gateway.js';
import { BENCH_DB } from './lookupServers.js';

const MODES = {
  unsafe: "sql.unsafe(text, [aid], { prepare: true }).values(), a 1 ms pause (setTimeout) between a loop's queries",
  'unsafe-timer': "the same with a Timeout per query (30 s), cleared when it answers, as sources/postgres.ts's backstop",
  'tagged-pause': 'a tagged template (sql`...`), as bench/floor.ts makes it, with the 1 ms pause',
  tagged: 'a tagged template, no pause',
} as const;
type Mode = keyof typeof MODES;
const DATA_URL = `postgres://postgres@127.0.0.1:5432/${BENCH_DB}`;
const LOOPS = 32;
const CLIENTS = 8;

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '6' }, rounds: { type: 'string', default: '2' }, child: { type: 'string' } } });

if (values.child) await child(values.child as Mode, Number(values.seconds));
else await parent();

async function child(mode: Mode, seconds: number): Promise<void> {
  const clients = Array.from({ length: CLIENTS }, () => postgres(DATA_URL, { max: 1, prepare: true, fetch_types: false, onnotice: () => undefined }));
  const pause = () => new Promise((r) => setTimeout(r, 1));
  let n = 0;
  let next = 0;
  const until = Date.now() + seconds * 1000;
  const one = async (sql: postgres.Sql, aid: number): Promise<unknown> => {
    const query = sql.unsafe('SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = $1', [aid], { prepare: true }).values();
    if (mode === 'unsafe') return query;
    let timer: NodeJS.Timeout | undefined;
    try {
      return await new Promise((resolve, reject) => {
        timer = setTimeout(() => reject(new Error('backstop')), 30_000);
        query.then(resolve, reject);
      });
    } finally {
      clearTimeout(timer);
    }
  };
  const loop = async () => {
    while (Date.now() < until) {
      const sql = clients[next];
      next = (next + 1) % CLIENTS;
      const aid = 1 + (n % 999_999);
      // The tagged template awaited right here, as the floor awaits it (through a function of its own, it promotes less).
      if (mode === 'tagged' || mode === 'tagged-pause') await sql`SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = ${aid}`;
      else await one(sql, aid);
      n++;
      if (mode !== 'tagged') await pause();
    }
  };
  await Promise.all(Array.from({ length: LOOPS }, loop));
  console.log(`queries ${n}`);
  await Promise.all(clients.map((c) => c.end({ timeout: 5 })));
}

interface Row {
  round: number;
  mode: Mode;
  queries: number;
  queries_per_s: number;
  scavenges: number;
  promoted_bytes_per_query: number;
}

async function parent(): Promise<void> {
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const self = fileURLToPath(import.meta.url);
  const rows: Row[] = [];
  for (let round = 1; round <= rounds; round++) {
    for (const mode of Object.keys(MODES) as Mode[]) {
      const out = spawnSync(process.execPath, ['--trace-gc-nvp', self, '--child', mode, '--seconds', String(seconds)], {
        encoding: 'utf8',
        maxBuffer: 256 << 20,
      });
      if (out.status !== 0) throw new Error(`${mode}: exit ${out.status}\n${out.stderr.slice(-2000)}`);
      const text = out.stdout + out.stderr;
      const queries = Number(/queries (\d+)/.exec(text)?.[1]);
      const scavenges = text.split('\n').filter((l) => / gc=s /.test(l));
      const promoted = scavenges.reduce((a, l) => a + Number(/ promoted=(\d+)/.exec(l)?.[1] ?? 0), 0);
      const row = {
        round,
        mode,
        queries,
        queries_per_s: Math.round(queries / seconds),
        scavenges: scavenges.length,
        promoted_bytes_per_query: Math.round(promoted / queries),
      };
      rows.push(row);
      console.log(JSON.stringify(row));
    }
  }
  let md = `# What a postgres.js lookup promotes, alone\n\nMade with \`node dist/bench/promotion.js ${process.argv.slice(2).join(' ')}\`: ${LOOPS} loops of \`SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = $1\` over ${CLIENTS} postgres.js clients (\`max: 1\`, prepared), ${seconds} s a cell in a child process under \`--trace-gc-nvp\`; promoted bytes are the sum of the young-generation collections' \`promoted=\`, divided by the queries run. Median (min-max) over ${rounds} round(s).\n\n| How each query is made | queries a second | scavenges | promoted bytes a query |\n|---|---|---|---|\n`;
  for (const mode of Object.keys(MODES) as Mode[]) {
    const rs = rows.filter((r) => r.mode === mode);
    md += `| ${MODES[mode]} | ${range(rs.map((r) => r.queries_per_s))} | ${fmt(median(rs.map((r) => r.scavenges)))} | ${range(rs.map((r) => r.promoted_bytes_per_query))} |\n`;
  }
  console.log('written to', writeResults('promotion', rows, md));
}
