// What waking a sleeping thread costs: two threads pass one message each way, with nothing else to do between round
// trips (a round trip every --gap ms, as at one caller, or back to back with --gap 0), by each way a pooled gateway's
// threads could signal each other: a BroadcastChannel (the gateway's calls and answers channels), a MessagePort, and
// counters in a SharedArrayBuffer with `Atomics.notify` and `Atomics.waitAsync` (no message: a wake-up alone). Each
// message is an answer batch of one (an array as contract/crossing.ts packs it). The CPU counted is the process's
// (both threads, and with a gap the main thread's timer too, alike for every kind); the latency is the round trip's.
//   npm run build && node dist/bench/wakes.js [--trips 3000] [--gap 1] [--rounds 3] [--name wakes]
import { BroadcastChannel, isMainThread, MessageChannel, type MessagePort, Worker, workerData } from 'node:worker_threads';
import { parseArgs } from 'node:util';
import { fmt, median, today, writeResults } from './gateway.js';

// Node 20 has Atomics.waitAsync; TypeScript's lib declares it from es2024 on.
type WaitAsync = (a: Int32Array, index: number, value: number) => { async: boolean; value: Promise<unknown> | string };
const waitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

type Kind = 'broadcast' | 'port' | 'atomics';
const KINDS: Kind[] = ['broadcast', 'port', 'atomics'];
interface Setup {
  kind: Kind;
  port: MessagePort;
  counters: Int32Array;
  scope: string;
}

const answer = (i: number) => [i, 200, ['content-type', 'application/json'], `{"aid":${i},"bid":1,"abalance":0}`, undefined, undefined, undefined];

/** The other thread: answers each message (or wake-up) at once. */
function echo({ kind, port, counters, scope }: Setup): void {
  setInterval(() => undefined, 1 << 30); // held open by the main thread's terminate, not by its channels
  if (kind === 'broadcast') {
    const out = new BroadcastChannel(`${scope}:b`);
    new BroadcastChannel(`${scope}:a`).onmessage = (e) => out.postMessage(e.data);
  } else if (kind === 'port') {
    port.on('message', (m) => port.postMessage(m));
  } else {
    let seen = 0;
    const wait = async (): Promise<void> => {
      for (;;) {
        const w = waitAsync(counters, 0, seen);
        if (w.async) await w.value;
        seen = Atomics.load(counters, 0);
        Atomics.add(counters, 1, 1);
        Atomics.notify(counters, 1);
      }
    };
    void wait();
  }
}

interface Row {
  round: number;
  kind: Kind;
  trips: number;
  gap_ms: number;
  cpu_us: number;
  p50_us: number;
  p90_us: number;
}

/** `trips` round trips of `kind`, one every `gap` ms. */
async function measure(kind: Kind, trips: number, gap: number, round: number): Promise<Row> {
  const { port1, port2 } = new MessageChannel();
  const counters = new Int32Array(new SharedArrayBuffer(8));
  const scope = `wakes-${process.pid}-${round}-${kind}`;
  const setup: Setup = { kind, port: port2, counters, scope };
  const worker = new Worker(new URL(import.meta.url), { workerData: setup, transferList: [port2] });
  await new Promise((r) => setTimeout(r, 300)); // the worker listening
  const a = new BroadcastChannel(`${scope}:a`);
  const b = new BroadcastChannel(`${scope}:b`);
  const trip = (i: number): Promise<void> => {
    if (kind === 'atomics') {
      const before = Atomics.load(counters, 1);
      Atomics.add(counters, 0, 1);
      Atomics.notify(counters, 0);
      const w = waitAsync(counters, 1, before);
      return w.async ? (w.value as Promise<unknown>).then(() => undefined) : Promise.resolve();
    }
    return new Promise((resolve) => {
      if (kind === 'broadcast') {
        b.onmessage = () => resolve();
        a.postMessage(answer(i));
      } else {
        port1.once('message', () => resolve());
        port1.postMessage(answer(i));
      }
    });
  };
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < trips; i++) {
    const t0 = process.hrtime.bigint();
    await trip(i);
    lat.push(Number(process.hrtime.bigint() - t0) / 1e3);
    if (gap > 0) await new Promise((r) => setTimeout(r, gap));
  }
  const cpu = process.cpuUsage(cpu0);
  a.close();
  b.close();
  port1.close();
  await worker.terminate();
  lat.sort((x, y) => x - y);
  const row = {
    round,
    kind,
    trips,
    gap_ms: gap,
    cpu_us: (cpu.user + cpu.system) / trips,
    p50_us: lat[lat.length >> 1],
    p90_us: lat[Math.floor(lat.length * 0.9)],
  };
  console.log(`r${round} ${kind.padEnd(9)} ${fmt(row.cpu_us, 1)} µs of CPU a round trip, p50 ${fmt(row.p50_us, 1)} µs, p90 ${fmt(row.p90_us, 1)}`);
  return row;
}

if (!isMainThread) echo(workerData as Setup);
else {
  const { values } = parseArgs({
    options: {
      trips: { type: 'string', default: '3000' },
      gap: { type: 'string', default: '1' },
      rounds: { type: 'string', default: '3' },
      name: { type: 'string', default: 'wakes' },
    },
  });
  const trips = Number(values.trips);
  const gap = Number(values.gap);
  const rows: Row[] = [];
  for (let round = 1; round <= Number(values.rounds); round++) {
    // Each round starts with a different kind, so none always runs first.
    for (const kind of [...KINDS.slice(round % 3), ...KINDS.slice(0, round % 3)]) rows.push(await measure(kind, trips, gap, round));
  }
  const med = (k: Kind, f: (r: Row) => number) => median(rows.filter((r) => r.kind === k).map(f));
  const markdown = `# Waking a sleeping thread (${today()})

Made with \`node dist/bench/wakes.js --trips ${trips} --gap ${gap} --rounds ${values.rounds} --name ${values.name}\`: two threads, ${trips} round trips a
kind and round, ${gap > 0 ? `one every ${gap} ms (both threads asleep between)` : 'back to back'}, the kinds in turn in
interleaved rounds; medians of the rounds. CPU: the process's (both threads${gap > 0 ? ", and the main thread's timer, alike for every kind" : ''}) over the round trips.

| Kind | µs of CPU a round trip | p50 µs | p90 µs |
|---|---|---|---|
${KINDS.map(
  (k) =>
    `| ${k} | ${fmt(
      med(k, (r) => r.cpu_us),
      1,
    )} | ${fmt(
      med(k, (r) => r.p50_us),
      1,
    )} | ${fmt(
      med(k, (r) => r.p90_us),
      1,
    )} |`,
).join('\n')}
`;
  console.log(`${markdown}\n${writeResults(values.name!, rows, markdown)}`);
}
