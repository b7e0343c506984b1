// The executor's side of recording, for bench/recorder.ts --path: a thread that makes runs at a steady rate
// through record() and a RunBatcher, as an executor does when its calls end, so the batches cross a real
// BroadcastChannel to a real recorder thread. The modules come from workerData.dist, so one harness
// measures two builds. Reports its own CPU (/proc/thread-self/schedstat: ns on the CPU, this thread only).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';

export interface ExecutorData {
  dist: string;
  home: string;
  rate: number;
  warmupS: number;
  seconds: number;
  max: number;
  /**
   * 'lookup': every run as the seeds' account lookup makes it (one query, one version, one key; no failures);
   * 'governed': the same with the seeds' governed key, its runs holding the trace's mask list (`abalance` hashed).
   */
  runs?: 'synthetic' | 'lookup' | 'governed';
  /** The recorder runs here too, hosted as an executor's 'record' task: its port comes in a { kind: 'record' } message. */
  hostsRecorder?: boolean;
}

/** What the executor thread tells the harness. */
export type ExecutorReport =
  | { kind: 'measuring' }
  /** `baseline*`: the same loop with record() left out (the harness's own cost, to subtract). */
  | { kind: 'done'; runs: number; made: number; cpuNs: number; baselineRuns: number; baselineNs: number };

export function threadCpuNs(): number {
  return Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
}

const data = workerData as ExecutorData;
const { record } = await import(`${data.dist}/src/call/record.js`);
const { RunBatcher } = await import(`${data.dist}/src/recorder/batcher.js`);
const runs = new RunBatcher(data.max, data.home);
const port = parentPort!;

// The synthetic runs of bench/recorder.ts: 50 queries × 4 versions, 200 keys, one run in 50 failing.
const failure = { code: 'query_timeout', message: 'canceling statement due to statement timeout' };
const queries = Array.from({ length: 50 }, (_, i) => `monthly_revenue_${i}`);
const keys = Array.from({ length: 200 }, (_, i) => `mobile-key-${i}`);
const requestIds = Array.from({ length: 4096 }, (_, i) => (0x5f3a0000 + i).toString(16).padStart(12, '0'));
const lookup = data.runs === 'lookup' || data.runs === 'governed';
/** A governed call's runs all hold its trace's list, one array (call/govern.ts). */
const masked = data.runs === 'governed' ? [{ column: 'abalance', action: 'hash' as const }] : null;
// A lookup's request ids as the server makes them (24 hex digits, requestIdFrom), each one used once in 4,096 runs.
if (lookup) for (let i = 0; i < requestIds.length; i++) requestIds[i] = randomBytes(12).toString('hex');

let made = 0;
/** record() itself, or nothing (the baseline). */
let recording = true;
function make(n: number, executedAt: string): void {
  if (!recording) {
    baseline(n, executedAt);
    return;
  }
  for (let i = 0; i < n; i++) {
    const k = ++made;
    // A call's target, as savedRun() makes one per call.
    if (lookup) {
      const t = { query: queries[0], version: 1, connectionName: 'warehouse', executedAt, transport: 'rest' as const };
      record(runs, t, keys[0], requestIds[k & 4095], 1, k % 3, (k % 2) / 10, masked, null);
      continue;
    }
    const t = { query: queries[k % 50], version: 1 + (k % 4), connectionName: 'warehouse', executedAt, transport: 'rest' as const };
    const error = k % 50 === 0;
    record(
      runs,
      t,
      keys[k % 200],
      requestIds[k & 4095],
      error ? null : k % 500,
      error ? null : k % 300,
      error ? null : (k % 40) / 10,
      null,
      error ? failure : null,
    );
  }
}

/** The loop of make() without record(): the same targets and arguments, handed to nothing. */
let sink = 0;
function baseline(n: number, executedAt: string): void {
  for (let i = 0; i < n; i++) {
    const k = ++made;
    const t = { query: queries[k % 50], version: 1 + (k % 4), connectionName: 'warehouse', executedAt, transport: 'rest' as const };
    const error = k % 50 === 0;
    sink += noop(t, keys[k % 200], requestIds[k & 4095], error ? null : k % 500, error ? failure : null);
  }
}
function noop(t: object, key: string, id: string, rows: number | null, failure: object | null): number {
  return t && key && id && (rows ?? 0) >= 0 && failure === null ? 1 : 0;
}

/** Makes runs at `rate` a second for `seconds`, a few milliseconds' worth at a time. */
async function paced(seconds: number): Promise<number> {
  const start = performance.now();
  let due = 0;
  const first = made;
  for (;;) {
    const elapsed = performance.now() - start;
    if (elapsed >= seconds * 1000) break;
    const want = Math.floor((data.rate * elapsed) / 1000);
    const d = new Date();
    make(
      want - due,
      `2026-12-02 ${String(d.getHours()).padStart(2, '0')}:${String(d.getMinutes()).padStart(2, '0')}:${String(d.getSeconds()).padStart(2, '0')}`,
    );
    due = want;
    await new Promise((r) => setTimeout(r, 2));
  }
  return made - first;
}

if (data.hostsRecorder) {
  // As workers/executor.ts's 'record' task: the recorder listens on this thread before the first run is made.
  const { port: recorderPort, data: hostData } = await new Promise<{ port: MessagePort; data: unknown }>((got) => port.once('message', (m) => got(m)));
  const { hostRecorder } = await import(`${data.dist}/src/recorder/host.js`);
  void hostRecorder(recorderPort, hostData, 'executor').then(() => port.postMessage({ kind: 'recorder stopped' }));
}

await paced(data.warmupS);
recording = false;
const b0 = threadCpuNs();
const baselineRuns = await paced(data.seconds);
const baselineNs = threadCpuNs() - b0;
recording = true;
port.postMessage({ kind: 'measuring' } satisfies ExecutorReport);
const c0 = threadCpuNs();
const n = await paced(data.seconds);
const cpuNs = threadCpuNs() - c0;
runs.flush();
port.postMessage({ kind: 'done', runs: n, made: made - baselineRuns, cpuNs, baselineRuns, baselineNs, sink } as ExecutorReport);
// Stays up to answer the harness's flush (DrainMessage 'flush') and the final drain; ended by the harness.
