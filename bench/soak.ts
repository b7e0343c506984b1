// A soak at a fixed rate: calls a primary-key lookup on the bundled examples at --rate calls a
// second for --seconds, samples the gateway's RSS every second, and checks at the end that every
// call left a run (the recorder's counters) and none was dropped, and that the version's history holds
// its newest QUERYAPIGATE_HISTORY_LIMIT runs (the ring) while its counter counts them all.
// Run: npm run build && node dist/bench/soak.js [--rate 1000] [--seconds 600]
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { startGateway, today, writeResults } from './gateway.js';

const { values } = parseArgs({ options: { rate: { type: 'string', default: '1000' }, seconds: { type: 'string', default: '600' } } });
const rate = Number(values.rate);
const seconds = Number(values.seconds);

const rssMb = (pid: number) => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)![1]) / 1024;
const metric = (text: string, outcome: string) => Number(text.match(new RegExp(`queryapigate_history_runs_total\\{outcome="${outcome}"\\} (\\d+)`))?.[1] ?? 0);

const home = mkdtempSync(join(tmpdir(), 'qag-soak-'));
const g = await startGateway({ QUERYAPIGATE_HOME: home, QUERYAPIGATE_LOAD_EXAMPLES: '1' });
try {
  await g.api('POST', '/api/v1/queries', {
    name: 'film_pk',
    connection_name: 'examples',
    description: 'pk',
    publish: true,
    sql: 'SELECT film_id, title FROM film WHERE film_id = :id',
    parameters: { id: { type: 'int', required: true } },
  });
  const key = (await g.api<{ secret: string }>('POST', '/api/v1/api-keys', { name: 'soak', queries: ['film_pk'], connections: [] })).secret;
  const url = new URL(g.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  let sent = 0,
    ok = 0,
    failed = 0,
    inFlight = 0,
    maxInFlight = 0;
  const call = () => {
    sent++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    const req = http.get({ agent, host: url.hostname, port: url.port, path: `/q/film_pk?id=${(sent % 60) + 1}`, headers: { 'X-API-Key': key } }, (res) => {
      res.resume();
      res.on('end', () => {
        inFlight--;
        if (res.statusCode === 200) ok++;
        else failed++;
      });
    });
    req.on('error', () => {
      inFlight--;
      failed++;
    });
  };
  const samples: Array<{ t: number; rss_mb: number; sent: number; in_flight: number }> = [];
  const start = Date.now();
  // Fixed rate: every 10 ms, send what the schedule says is due (open loop, not waiting on answers).
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      const due = Math.min(rate * seconds, Math.floor(((Date.now() - start) / 1000) * rate));
      while (sent < due) call();
      if (Date.now() - start >= seconds * 1000) {
        clearInterval(tick);
        clearInterval(sampler);
        resolve();
      }
    }, 10);
    const sampler = setInterval(
      () => samples.push({ t: Math.round((Date.now() - start) / 1000), rss_mb: Math.round(rssMb(g.pid)), sent, in_flight: inFlight }),
      1000,
    );
  });
  while (inFlight > 0) await new Promise((r) => setTimeout(r, 50));
  agent.destroy();
  await new Promise((r) => setTimeout(r, 2500)); // the recorder's last flush
  const m = await (await fetch(`${g.url}/metrics`)).text();
  const recorded = metric(m, 'recorded');
  const dropped = metric(m, 'dropped');
  const store = new Database(join(home, 'queryapigate.db'), { readonly: true });
  const history = store
    .prepare(`SELECT (SELECT count(*) FROM run_history WHERE query_name = 'film_pk') AS rows,
    (SELECT runs_recorded FROM saved_query_versions WHERE query_name = 'film_pk') AS counted`)
    .get() as { rows: number; counted: number };
  store.close();
  const rss = samples.map((s) => s.rss_mb);
  const minute = (from: number, to: number) => {
    const xs = samples.filter((s) => s.t >= from && s.t < to).map((s) => s.rss_mb);
    return xs.length ? Math.round(xs.reduce((a, b) => a + b, 0) / xs.length) : null;
  };
  const result = {
    rate,
    seconds,
    sent,
    ok,
    failed,
    recorded,
    dropped,
    runs_kept: recorded / ok,
    history_rows: history.rows,
    history_runs_counted: history.counted,
    max_in_flight: maxInFlight,
    rss_first_minute_mb: minute(0, 60),
    rss_last_minute_mb: minute(seconds - 60, seconds + 1),
    rss_min_mb: Math.min(...rss),
    rss_max_mb: Math.max(...rss),
    loadavg: loadavg(),
  };
  console.log(JSON.stringify(result));
  const perMinute = Array.from({ length: Math.ceil(seconds / 60) }, (_, i) => `| ${i + 1} | ${minute(i * 60, (i + 1) * 60)} |`).join('\n');
  const md = `# Soak at a fixed rate (${today()})

Made with \`node dist/bench/soak.js --rate ${rate} --seconds ${seconds}\`: an open-loop Node client sends ${rate} calls a second to a
primary-key lookup on the bundled SQLite examples (one gateway process, default executors, SQLite store) for ${seconds} s,
sampling the gateway's RSS every second. Load average at the end: ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')} on 2 cores.

| Calls sent | 200 | failed | runs recorded | runs dropped | runs kept | history rows / runs counted | max in flight | RSS first minute | RSS last minute | RSS min-max |
|---|---|---|---|---|---|---|---|---|---|---|
| ${sent} | ${ok} | ${failed} | ${recorded} | ${dropped} | ${(result.runs_kept * 100).toFixed(2)}% | ${history.rows} / ${history.counted} | ${maxInFlight} | ${result.rss_first_minute_mb} MB | ${result.rss_last_minute_mb} MB | ${result.rss_min_mb}-${result.rss_max_mb} MB |

History rows / runs counted: the lookup version's rows in run_history (a ring of QUERYAPIGATE_HISTORY_LIMIT, default 50) and its
runs_recorded counter, which counts every run the recorder wrote.

RSS, mean per minute:

| Minute | RSS MB |
|---|---|
${perMinute}
`;
  console.log(md, '\nwritten to', writeResults('soak', [result, ...samples], md));
} finally {
  await g.stop();
  rmSync(home, { recursive: true, force: true });
}
