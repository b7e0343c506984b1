// Loaded into a server by bench/gcWindows.ts (`node --expose-gc --import <this> ...`): what V8's
// collections do in a window of load. SIGURG opens a window (a GCProfiler, and the main thread's
// pauses counted from here); SIGUSR2 closes it and writes the window's figures, then those of a full
// collection, to QAG_GC_PROBE_OUT as JSON. Signals, so that nothing reaches the server's HTTP surface.
// A process no window was taken of (bench/levers.ts: `NODE_ARGS=--import=<repo>/dist/bench/gcProbe.js`)
// writes its whole life's pauses there as it exits instead: by kind, count, total, longest, and over 2 ms.
import { writeFileSync } from 'node:fs';
import v8 from 'node:v8';
import { observePauses } from './gcPauses.js';

const OUT = process.env.QAG_GC_PROBE_OUT ?? `/tmp/qag-gc-probe-${process.pid}.json`;
const pauses = observePauses();
let windowed = false;
process.on('exit', () => {
  if (!windowed) writeFileSync(OUT, JSON.stringify({ pauses }));
});

let profiler: v8.GCProfiler | null = null;
let from: Record<string, { n: number; ms: number }> = {};

const used = (spaces: { spaceName: string; spaceUsedSize: number }[], name: string) => spaces.find((s) => s.spaceName === name)?.spaceUsedSize ?? 0;

process.on('SIGURG', () => {
  from = structuredClone(pauses);
  profiler = new v8.GCProfiler();
  profiler.start();
});

process.on('SIGUSR2', () => {
  windowed = true;
  const events = profiler?.stop()?.statistics ?? [];
  profiler = null;
  // A scavenge's promotion is what the old space gained across it; its survivors, what stayed young.
  let promoted = 0;
  let survived = 0;
  let scavenges = 0;
  for (const e of events) {
    if (e.gcType !== 'Scavenge') continue;
    scavenges++;
    promoted += used(e.afterGC.heapSpaceStatistics, 'old_space') - used(e.beforeGC.heapSpaceStatistics, 'old_space');
    survived += used(e.afterGC.heapSpaceStatistics, 'new_space');
  }
  const window = Object.fromEntries(Object.entries(pauses).map(([k, v]) => [k, { n: v.n - (from[k]?.n ?? 0), ms: v.ms - (from[k]?.ms ?? 0) }]));
  (globalThis as { gc?: () => void }).gc?.();
  writeFileSync(OUT, JSON.stringify({ promoted, survived, scavenges, pauses: window, liveAfterFullGc: process.memoryUsage().heapUsed }));
});
