// node .probe/harness.mjs <dist/bench dir>: the bench process's own CPU while a gateway cell runs (10 s, 32 callers).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const dir = process.argv[2];
const { startGateway, accountLookup } = await import(`${dir}/gateway.js`);
const { runLoad } = await import(`${dir}/load.js`);
const g = await startGateway({ QUERYAPIGATE_HOME: mkdtempSync(join(tmpdir(), 'qag-h-')), QUERYAPIGATE_METADATA_CACHE_TTL: '5', QUERYAPIGATE_WORKERS: '0' });
const { url, key } = await accountLookup(g, 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench');
const c0 = process.cpuUsage();
const load = await runLoad({ randRegexUrl: url, duration: 10, connections: 32, warmup: 2, headers: { 'X-API-Key': key }, pid: g.pid });
const c = process.cpuUsage(c0);
console.log(dir, { rps: Math.round(load.rps), perCpu: Math.round(load.requests / load.cpu_s), p99: load.p99_ms, benchCpuS: ((c.user + c.system) / 1e6).toFixed(2), outputMB: (g.output().length / 1e6).toFixed(1) });
await g.stop();
