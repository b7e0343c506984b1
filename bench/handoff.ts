// What handing a call to an executor thread costs, without the call: piscina's round trip per call
// (a task and its result) against the calls of one turn sent as one task and answered a turn at a
// time on a BroadcastChannel (as http/callBatches.ts does). The executor answers at once, so the
// CPU counted (the whole process, both threads) is the hand-off's. 32 callers, interleaved rounds.
//   npm run build && node dist/bench/handoff.js [--calls 40000] [--rounds 3]
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BroadcastChannel } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { Answer, AnswerBatch, CallBatch, Request } from '../src/contract/exchange.js';
import { median, today, writeResults } from './gateway.js';

const { values } = parseArgs({ options: { calls: { type: 'string', default: '40000' }, rounds: { type: 'string', default: '3' } } });
const CALLS = Number(values.calls);
const CALLERS = 32;

const pool = new Piscina({
  filename: fileURLToPath(new URL('./handoffWorker.js', import.meta.url)),
  minThreads: 1,
  maxThreads: 1,
  concurrentTasksPerWorker: 64,
  atomics: 'disabled',
});
const request = (i: number): Request => ({
  method: 'GET',
  url: '/q/account',
  query: `aid=${i}`,
  requestId: 'abcdef012345',
  apiKey: 'qag_0123456789abcdef0123456789abcdef',
  ifNoneMatch: '',
  lastEventId: '',
  ip: '127.0.0.1',
  body: null,
  started: 0,
});

const channel = new BroadcastChannel('qag-bench-handoff');
const waiting = new Map<number, (a: Answer) => void>();
channel.onmessage = (e: unknown) => {
  const { ids, answers } = (e as { data: AnswerBatch }).data;
  for (let i = 0; i < ids.length; i++) {
    waiting.get(ids[i])!(answers[i]);
    waiting.delete(ids[i]);
  }
};
let nextId = 0;
let outgoing: CallBatch['calls'] = [];
function batched(req: Request): Promise<Answer> {
  return new Promise((resolve) => {
    const id = nextId++;
    waiting.set(id, resolve);
    if (outgoing.length === 0) {
      setImmediate(() => {
        const calls = outgoing;
        outgoing = [];
        void pool.run({ calls } satisfies CallBatch, { name: 'batch' });
      });
    }
    outgoing.push({ id, task: 'call', req });
  });
}
const perCall = (req: Request): Promise<Answer> => pool.run(req) as Promise<Answer>;

async function measure(send: (req: Request) => Promise<Answer>): Promise<{ cpu_us: number; wall_us: number }> {
  let i = 0;
  const cpu = process.cpuUsage();
  const wall = performance.now();
  await Promise.all(
    Array.from({ length: CALLERS }, async () => {
      while (i < CALLS) await send(request(i++));
    }),
  );
  const used = process.cpuUsage(cpu);
  return { cpu_us: (used.user + used.system) / CALLS, wall_us: ((performance.now() - wall) * 1000) / CALLS };
}

const cells: Record<string, (req: Request) => Promise<Answer>> = { 'a task per call': perCall, 'a task per turn, answers per turn': batched };
await measure(perCall); // warm both threads
await measure(batched);
const rows: Array<{ round: number; cell: string; cpu_us: number; wall_us: number }> = [];
for (let round = 0; round < Number(values.rounds); round++) {
  for (const [cell, send] of Object.entries(cells)) rows.push({ round, cell, ...(await measure(send)) });
}
await pool.destroy();
channel.close();

const table = Object.keys(cells)
  .map((cell) => {
    const mine = rows.filter((r) => r.cell === cell);
    return `| ${cell} | ${median(mine.map((r) => r.cpu_us)).toFixed(1)} | ${median(mine.map((r) => r.wall_us)).toFixed(1)} |`;
  })
  .join('\n');
const md = `# Handing calls to an executor (${today()})

Made with \`node dist/bench/handoff.js --calls ${CALLS} --rounds ${values.rounds}\`: ${CALLERS} callers, an executor that
answers at once, so the process's CPU per call is the hand-off's (both threads). Medians of the rounds.

| Hand-off | CPU µs per call | wall µs per call |
|---|---|---|
${table}
`;
console.log(md);
console.log('written to', writeResults('handoff', rows, md));
