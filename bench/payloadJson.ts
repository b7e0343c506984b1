// A run's payload JSON (store/events.ts payloadJson, what the recorder makes of each run history keeps, as its entry;
// until stop 57 also its event's) against the reference it must equal, JSON.stringify of the run's other fields: CPU per run over batches of
// 512 runs shaped as the recorder unpacks them (fractional durations, a few transports, one run in 50 failing).
// --from measures another build's payloadJson (a copy of dist/ inside this worktree, say dist-before).
//
//   node dist/bench/payloadJson.js [--rounds 5] [--from dist-before]
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { RunRecord } from '../src/contract/messages.js';
import { packRuns, unpackRuns } from '../src/contract/runs.js';
import { syntheticRun } from './syntheticRun.js';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '5' }, from: { type: 'string' } } });
const BATCH = 512;
const REPEAT = 400;
const repo = fileURLToPath(new URL('../..', import.meta.url));
const events = args.from ? join(repo, args.from, 'src/store/events.js') : '../src/store/events.js';
const { payloadJson } = (await import(events)) as { payloadJson: (run: RunRecord) => string };

const TRANSPORTS = ['rest', 'mcp', 'sql'];
/** bench/syntheticRun.ts's runs with fractional durations (their decimals are most of the JSON's cost) and a few transports. */
function run(n: number): RunRecord {
  const r = syntheticRun(n, `2026-12-05 10:00:${String(n % 60).padStart(2, '0')}`);
  if (r.status === 'success') {
    r.duration_ms = 0.2 + (n % 300) / 7;
    r.serialization_ms = (n % 40) / 13;
  }
  r.transport = TRANSPORTS[n % 3];
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
