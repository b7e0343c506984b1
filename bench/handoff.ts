// What handing a call to an executor thread costs, without the call: piscina's round trip per call
// (a task and its result) against the gateway's own hand-off, http/callBatches.ts with
// call/answerBatches.ts in the worker (the calls of one turn as one batch, answered a turn at a time
// on a channel), the batch sent as a piscina task or, as the gateway sends it, on the executor's own
// calls channel. The executor answers at once, so the CPU counted (the whole process, its threads)
// is the hand-off's. 32 callers, interleaved rounds.
//   npm run build && node dist/bench/handoff.js [--calls 40000] [--rounds 3] [--only channel]
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Piscina } from 'piscina';
import type { Answer, Request } from '../src/contract/exchange.js';
import { createCallBatcher } from '../src/http/callBatches.js';
import { median, today, writeResults } from './gateway.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '40000' },
    rounds: { type: 'string', default: '3' },
    /** Only the cells whose name holds this (say, `channel` for the gateway's own hand-off, when profiling it). */
    only: { type: 'string', default: '' },
  },
});
const CALLS = Number(values.calls);
const CALLERS = 32;

/** One executor thread; `listen`: it takes batches on its calls channel (the gateway's way), else as piscina tasks. */
const executor = (scope: string, listen: boolean) =>
  new Piscina({
    filename: fileURLToPath(new URL('./handoffWorker.js', import.meta.url)),
    minThreads: 1,
    maxThreads: 1,
    concurrentTasksPerWorker: 64,
    atomics: 'disabled',
    workerData: { scope, listen },
  });
// The answers channels' scopes, as the gateway gives its executors one (ExecutorData.answers).
const TASKS = 'bench-handoff-tasks';
const CALLS_CHANNEL = 'bench-handoff-calls';
const pool = executor(TASKS, false);
const listening = executor(CALLS_CHANNEL, true);
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

const batcher = createCallBatcher(pool, TASKS, { running: 1024, queue: 1024 });
const batched = (req: Request): Promise<Answer> => batcher.run(req, 'call');
const direct = createCallBatcher(listening, CALLS_CHANNEL, { running: 1024, queue: 1024 });
const onChannel = (req: Request): Promise<Answer> => direct.run(req, 'call');
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

const cells: Record<string, (req: Request) => Promise<Answer>> = Object.fromEntries(
  Object.entries({
    'a task per call': perCall,
    'a task per turn, answers per turn': batched,
    "a batch per turn on the executor's calls channel (the gateway's), answers per turn": onChannel,
  }).filter(([name]) => name.includes(values.only!)),
);
// The answers channel is unref'd and a batch's task ends before its answers are posted (in the gateway its
// socket keeps the process alive): without this the bench could run out of things to wait on and exit (code 13).
const alive = setInterval(() => {}, 1000);
for (const send of Object.values(cells)) await measure(send); // warm both threads
const rows: Array<{ round: number; cell: string; cpu_us: number; wall_us: number }> = [];
for (let round = 0; round < Number(values.rounds); round++) {
  for (const [cell, send] of Object.entries(cells)) rows.push({ round, cell, ...(await measure(send)) });
}
await pool.destroy();
await listening.destroy();
batcher.close();
direct.close();
clearInterval(alive);

const table = Object.keys(cells)
  .map((cell) => {
    const mine = rows.filter((r) => r.cell === cell);
    return `| ${cell} | ${median(mine.map((r) => r.cpu_us)).toFixed(1)} | ${median(mine.map((r) => r.wall_us)).toFixed(1)} |`;
  })
  .join('\n');
const md = `# Handing calls to an executor (${today()})

Made with \`node dist/bench/handoff.js --calls ${CALLS} --rounds ${values.rounds}${values.only ? ` --only ${values.only}` : ''}\`: ${CALLERS} callers, an executor that
answers at once, so the process's CPU per call is the hand-off's (both threads). Medians of the rounds.

| Hand-off | CPU µs per call | wall µs per call |
|---|---|---|
${table}
`;
console.log(md);
console.log('written to', writeResults('handoff', rows, md));
