// The crossing alone, in one thread: CPU per run to serialize and deserialize a batch of 512 runs (what
// postMessage and the receiving thread do) as objects, against packed (contract/runs.ts: packing, then
// serializing; deserializing, then unpacking). Rounds alternate the two; the last rounds are printed.
//
//   node dist/bench/runPacking.js [--rounds 6]
import { parseArgs } from 'node:util';
import { deserialize, serialize } from 'node:v8';
import { packRuns, RunPacker, unpackRuns } from '../src/contract/runs.js';
import { syntheticRun } from './syntheticRun.js';

const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '6' } } });
const BATCH = 512;
const REPEAT = 400;

const runs = Array.from({ length: BATCH }, (_, i) => syntheticRun(i, `2026-12-02 10:00:${String(i % 60).padStart(2, '0')}`));
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
