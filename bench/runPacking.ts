// The crossing alone, in one thread: CPU per run to serialize and deserialize a batch of 512 runs (what
// postMessage and the receiving thread do) as objects, against packed (contract/runs.ts: packing, then
// serializing; deserializing, then unpacking). Rounds alternate the two; the last rounds are printed.
//
//   node dist/bench/runPacking.js [--rounds 6]
import { parseArgs } from 'node:util';
import { deserialize, serialize } from 'node:v8';
import type { RunRecord } from '../src/contract/messages.js';
import { packRuns, RunPacker, unpackRuns } from '../src/contract/runs.js';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '6' } } });
const BATCH = 512;
const REPEAT = 400;

function run(n: number): RunRecord {
  const error = n % 50 === 0;
  const r: RunRecord = {
    query: `monthly_revenue_${n % 50}`,
    version: 1 + (n % 4),
    kind: 'saved',
    executed_at: `2026-12-02 10:00:${String(n % 60).padStart(2, '0')}`,
    status: error ? 'error' : 'success',
    connection_name: 'warehouse',
    key_name: `mobile-key-${n % 200}`,
    request_id: n.toString(16).padStart(12, '0'),
    rows: error ? null : n % 500,
    duration_ms: error ? null : n % 300,
    serialization_ms: error ? null : (n % 40) / 10,
    transport: 'rest',
  };
  if (error) Object.assign(r, { error: 'canceling statement due to statement timeout', code: 'query_timeout' });
  return r;
}

const runs = Array.from({ length: BATCH }, (_, i) => run(i));
const packer = new RunPacker(BATCH);
const usPerRun = (f: () => void) => {
  const c0 = process.cpuUsage();
  for (let i = 0; i < REPEAT; i++) f();
  const c = process.cpuUsage(c0);
  return ((c.user + c.system) / (REPEAT * BATCH)).toFixed(2);
};
const asObjects = serialize({ runs });
const asPacked = serialize({ runs: packRuns(runs) });
console.log(`${BATCH} runs a batch, ${REPEAT} batches a figure; µs of CPU per run`);
for (let r = 1; r <= Number(args.rounds); r++) {
  const objects = [usPerRun(() => serialize({ runs })), usPerRun(() => deserialize(asObjects))];
  const packed = [
    usPerRun(() => {
      for (const x of runs) packer.add(x);
      serialize({ runs: packer.take() });
    }),
    usPerRun(() => unpackRuns(deserialize(asPacked).runs)),
  ];
  console.log(`round ${r}: objects: send ${objects[0]}, receive ${objects[1]} | packed: pack and send ${packed[0]}, receive and unpack ${packed[1]}`);
}
