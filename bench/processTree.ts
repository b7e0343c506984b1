// A process and its descendants, read from /proc: their CPU seconds (all threads) and RSS, for the
// benches that charge a server for what it and its children used.
import { readdirSync, readFileSync } from 'node:fs';
import { processCpuSeconds } from './load.js';

/** The pid and all its descendants (from each process's ppid in /proc). */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
    } catch {
      // exited while listed
    }
  }
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...(children.get(out[i]) ?? []));
  return out;
}

/** utime+stime of the tree's live processes (all their threads); with `reaped`, of the children they
 *  waited for too, so a process that exits between two readings does not take its CPU with it. */
export function treeCpuSeconds(root: number, reaped = false): number {
  let s = 0;
  for (const p of processTree(root)) {
    try {
      s += processCpuSeconds(p, reaped);
    } catch {
      // exited
    }
  }
  return s;
}

/** VmRSS of the tree's processes, in MiB. */
export function treeRssMiB(root: number): number {
  let kb = 0;
  for (const p of processTree(root)) {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      if (m) kb += Number(m[1]);
    } catch {
      // exited
    }
  }
  return Math.round(kb / 102.4) / 10;
}
