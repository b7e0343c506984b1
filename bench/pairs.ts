// Two sides of a comparison in turn, in short slices: keys.ts (two keys, one gateway) and modes.ts (two gateways, one
// machine). Cells of a minute each, one after the other, put minutes of the host's swings between the two figures they
// compare; slices of a few seconds, the order alternating pair by pair, put seconds, and the ratios of many pairs show
// how far the noise reaches. Each slice is charged the CPU (utime + stime, from /proc) of the process that served it.
import { fmt, median } from './gateway.js';
import type { LoadResult } from './load.js';

export interface Side {
  name: string;
  /** `seconds` of load on this side, its server's CPU counted (runLoad with `pid`). */
  slice(seconds: number): Promise<LoadResult>;
}

export interface PairRow {
  pair: number;
  side: string;
  calls: number;
  cpu_s: number;
  per_cpu_s: number;
  rps: number;
  p50_ms: number;
  p99_ms: number;
}

export interface PairSummary {
  /** The second side's calls per CPU-s over the first's, pair by pair: their median, quartiles, extremes. */
  median_ratio: number;
  q1: number;
  q3: number;
  lowest: number;
  highest: number;
  /** Pairs where the second side made fewer calls per CPU-s. */
  lower: number;
  /** Each side's calls over its CPU, all slices together. */
  all: Record<string, number>;
}

/** `warm` seconds of each side, then `pairs` pairs of `slice`-second slices, the order within a pair alternating. */
export async function alternate(sides: [Side, Side], pairs: number, slice: number, warm: number): Promise<PairRow[]> {
  const rows: PairRow[] = [];
  for (const s of sides) await s.slice(warm);
  for (let pair = 1; pair <= pairs; pair++) {
    // Each pair's order the other way round from the last's, so neither side always follows the other.
    for (const s of pair % 2 ? sides : [sides[1], sides[0]]) {
      const r = await s.slice(slice);
      if (r.non2xx + r.errors > 0) throw new Error(`${s.name}: ${r.non2xx} answers not 2xx and ${r.errors} errors`);
      const cpu = r.cpu_s ?? 0;
      rows.push({ pair, side: s.name, calls: r.requests, cpu_s: cpu, per_cpu_s: r.requests / cpu, rps: r.rps, p50_ms: r.p50_ms, p99_ms: r.p99_ms });
    }
    const [a, b] = sides.map((s) => rows.slice(-2).find((r) => r.side === s.name)!);
    console.log(`pair ${pair}: ${a.side} ${fmt(a.per_cpu_s)}, ${b.side} ${fmt(b.per_cpu_s)} calls per CPU-s, ${fmt(b.per_cpu_s / a.per_cpu_s, 3)}`);
  }
  return rows;
}

const ofSide = (rows: PairRow[], side: string) => rows.filter((r) => r.side === side);

export function summarize(rows: PairRow[], [a, b]: [string, string]): PairSummary {
  const first = ofSide(rows, a);
  const second = ofSide(rows, b);
  const ratios = first.map((r, i) => second[i].per_cpu_s / r.per_cpu_s).sort((x, y) => x - y);
  const quartile = (q: number) => ratios[Math.min(ratios.length - 1, Math.floor(q * ratios.length))];
  const all = (side: PairRow[]) => side.reduce((s, r) => s + r.calls, 0) / side.reduce((s, r) => s + r.cpu_s, 0);
  return {
    median_ratio: median(ratios),
    q1: quartile(0.25),
    q3: quartile(0.75),
    lowest: ratios[0],
    highest: ratios[ratios.length - 1],
    lower: ratios.filter((r) => r < 1).length,
    all: { [a]: all(first), [b]: all(second) },
  };
}

/** The summary's lines and the table pair by pair, in Markdown. */
export function pairsMarkdown(rows: PairRow[], [a, b]: [string, string], s: PairSummary): string {
  const first = ofSide(rows, a);
  const second = ofSide(rows, b);
  return `- ${b} calls per CPU-s over ${a}'s, pair by pair: median ${fmt(s.median_ratio, 3)}, quartiles
  ${fmt(s.q1, 3)}-${fmt(s.q3, 3)}, lowest ${fmt(s.lowest, 3)}, highest ${fmt(s.highest, 3)};
  below 1 in ${s.lower} pairs of ${first.length}.
- All slices together: ${a} ${fmt(s.all[a])}, ${b} ${fmt(s.all[b])} calls per CPU-s,
  ${fmt(s.all[b] / s.all[a], 3)}.
- p50 at the median of the slices: ${a} ${fmt(median(first.map((r) => r.p50_ms)), 3)} ms, ${b} ${fmt(median(second.map((r) => r.p50_ms)), 3)} ms.

| pair | ${a} calls per CPU-s | ${b} calls per CPU-s | ${b} / ${a} | ${a} p50 ms | ${b} p50 ms | ${a} p99 ms | ${b} p99 ms |
|---:|---:|---:|---:|---:|---:|---:|---:|
${first
  .map((p, i) => {
    const g = second[i];
    return `| ${i + 1} | ${fmt(p.per_cpu_s)} | ${fmt(g.per_cpu_s)} | ${fmt(g.per_cpu_s / p.per_cpu_s, 3)} | ${fmt(p.p50_ms, 3)} | ${fmt(g.p50_ms, 3)} | ${fmt(p.p99_ms, 2)} | ${fmt(g.p99_ms, 2)} |`;
  })
  .join('\n')}
`;
}
