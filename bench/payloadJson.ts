// A run's payload JSON (store/events.ts payloadJson, what the recorder makes of each run for its event and its history
// entry) against the reference it must equal, JSON.stringify of the run's other fields: CPU per run over batches of
// 512 runs shaped as the recorder unpacks them (fractional durations, a few transports, one run in 50 failing).
// --from measures another build's payloadJson (a copy of dist/ inside this worktree, say dist-before).
//
//   node dist/bench/payloadJson.js [--rounds 5] [--from dist-before]
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { RunRecord } from '../src/contract/messages.js';
import { unpackRuns, packRuns } from '../src/contract/runs.js';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, from: { type: 'string' } } });
const BATCH = 512;
const REPEAT = 400;
const repo = fileURLToPath(new URL('../..', import.meta.url));
const events = args.from ? join(repo, args.from, 'src/store/events.js') : '../src/store/events.js';
const { payloadJson } = (await import(events)) as { payloadJson: (run: RunRecord) => string };

function run(n: number): RunRecord {
  const error = n % 50 === 49;
  const r: RunRecord = {
    query: `query-${n % 50}`,
    version: 1 + (n % 4),
    kind: 'saved',
    executed_at: `2026-12-05 10:00:${String(n % 60).padStart(2, '0')}`,
    status: error ? 'error' : 'success',
    connection_name: 'warehouse',
    key_name: `mobile-key-${n % 200}`,
    request_id: (0x10000000000 + n * 7919).toString(16),
    rows: error ? null : n % 500,
    duration_ms: error ? null : 0.2 + (n % 300) / 7,
    serialization_ms: error ? null : (n % 40) / 13,
    transport: ['rest', 'mcp', 'sql'][n % 3],
  };
  if (error) Object.assign(r, { error: 'canceling statement due to statement timeout', code: 'query_timeout' });
  return r;
}

const runs = unpackRuns(packRuns(Array.from({ length: BATCH }, (_, i) => run(i))));
let sink = 0;
const usPerRun = (f: (r: RunRecord) => string) => {
  const c0 = process.cpuUsage();
  for (let i = 0; i < REPEAT; i++) for (const r of runs) sink += f(r).length;
  const c = process.cpuUsage(c0);
  return ((c.user + c.system) / (REPEAT * BATCH)).toFixed(2);
};
const reference = (r: RunRecord) => {
  const { executed_at, query, key_name, status, ...rest } = r;
  return JSON.stringify(rest);
};
for (const r of runs) if (payloadJson(r) !== reference(r)) throw new Error(`payloadJson differs from the reference for ${JSON.stringify(r)}`);
console.log(`${BATCH} runs a batch, ${REPEAT} batches a figure; µs of CPU per run${args.from ? ` (payloadJson of ${args.from})` : ''}`);
for (let round = 1; round <= Number(args.rounds); round++) {
  console.log(`round ${round}: payloadJson ${usPerRun(payloadJson)}, JSON.stringify of the rest ${usPerRun(reference)}`);
}
if (sink === 0) console.log('(nothing made)');
