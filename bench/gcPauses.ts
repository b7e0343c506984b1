// NOT A PRODUCT: this thread's collection pauses by kind (count, total, longest, over 2 ms), counted from the call
// on, for the probes loaded into a server (bench/gcProbe.ts, bench/gcThreads.ts).
import { constants, PerformanceObserver } from 'node:perf_hooks';

export type Pauses = Record<string, { n: number; ms: number; maxMs: number; over2ms: number }>;

const KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
};

/** Starts counting; the object answered fills as collections happen. */
export function observePauses(): Pauses {
  const pauses: Pauses = {};
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const kind = KINDS[(e as unknown as { detail: { kind: number } }).detail.kind] ?? 'other';
      pauses[kind] ??= { n: 0, ms: 0, maxMs: 0, over2ms: 0 };
      const p = pauses[kind];
      p.n++;
      p.ms += e.duration;
      p.maxMs = Math.max(p.maxMs, e.duration);
      if (e.duration > 2) p.over2ms++;
    }
  }).observe({ entryTypes: ['gc'] });
  return pauses;
}
