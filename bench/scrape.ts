// What a /metrics scrape costs the gateway's process with several executors: each thread's snapshot crosses to
// the acceptor, which merges them. 100 keys each call the account lookup a few times first, so every executor
// holds label sets of its own. CPU from /proc/<pid>/stat over --scrapes scrapes in a row; builds (--main, a
// dist's src/main.js each) in interleaved rounds.
//   npm run build && node dist/bench/scrape.js [--workers 3] [--scrapes 200] [--rounds 2] [--main dist-before/src/main.js,dist/src/main.js] [--suffix s]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { accountLookup, median, startGateway, today, writeResults } from './gateway.js';
import { processCpuSeconds } from './load.js';

const { values } = parseArgs({
  options: {
    workers: { type: 'string', default: '3' },
    scrapes: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '2' },
    main: { type: 'string', default: 'dist/src/main.js' },
    pg: { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench' },
    suffix: { type: 'string' },
  },
});
const SCRAPES = Number(values.scrapes);
const KEYS = 100;
const builds = values.main!.split(',').map((m) => resolve(m));

async function cell(main: string): Promise<{ cpu_ms: number; wall_ms: number; bytes: number }> {
  const home = mkdtempSync(join(tmpdir(), 'qag-scrape-'));
  const g = await startGateway(
    { QUERYAPIGATE_HOME: home, QUERYAPIGATE_WORKERS: values.workers!, QUERYAPIGATE_METADATA_CACHE_TTL: '5' },
    'bench-admin',
    [],
    main,
  );
  try {
    const { url } = await accountLookup(g, values.pg!);
    const lookup = url.slice(0, url.indexOf('\\?')); // the pattern's path, before its escaped query
    for (let k = 0; k < KEYS; k++) {
      const { secret } = await g.api<{ secret: string }>('POST', '/api/v1/api-keys', { name: `k${k}`, queries: ['account'], connections: [] });
      const statuses = await Promise.all(
        Array.from({ length: 6 }, (_, i) => fetch(`${lookup}?aid=${k * 10 + i + 1}`, { headers: { 'X-API-Key': secret } }).then((r) => r.status)),
      );
      if (statuses.some((s) => s !== 200)) throw new Error(`a lookup answered ${statuses.join(', ')}`);
    }
    const scrape = async () => (await (await fetch(`${g.url}/metrics`, { headers: { 'X-API-Key': 'bench-admin' } })).text()).length;
    await scrape();
    const cpu = processCpuSeconds(g.pid);
    const wall = performance.now();
    let bytes = 0;
    for (let i = 0; i < SCRAPES; i++) bytes += await scrape();
    return { cpu_ms: ((processCpuSeconds(g.pid) - cpu) * 1000) / SCRAPES, wall_ms: (performance.now() - wall) / SCRAPES, bytes: Math.round(bytes / SCRAPES) };
  } finally {
    await g.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

const rows: Array<{ round: number; main: string; cpu_ms: number; wall_ms: number; bytes: number }> = [];
for (let round = 0; round < Number(values.rounds); round++) {
  for (const main of builds) {
    const r = await cell(main);
    rows.push({ round, main, ...r });
    console.log(round, main, r);
  }
}
const table = builds
  .map((main) => {
    const mine = rows.filter((r) => r.main === main);
    return `| ${main} | ${median(mine.map((r) => r.cpu_ms)).toFixed(2)} (${mine.map((r) => r.cpu_ms.toFixed(2)).join(' / ')}) | ${median(mine.map((r) => r.wall_ms)).toFixed(2)} | ${mine[0].bytes} |`;
  })
  .join('\n');
const md = `# A /metrics scrape with ${values.workers} executors (${today()})

Made with \`node dist/bench/scrape.js --workers ${values.workers} --scrapes ${SCRAPES} --rounds ${values.rounds} --main ${values.main}\`:
${KEYS} keys call the account lookup 6 times each first (label sets in every executor), then ${SCRAPES} scrapes in a row;
the gateway process's CPU (every thread) per scrape, median (each round) of the interleaved rounds.

| Build | CPU ms a scrape | wall ms a scrape | bytes |
|---|---|---|---|
${table}
`;
console.log(md);
console.log('written to', writeResults('scrape', rows, md, values.suffix));
