// In charge of the scheduling policy the server's threads run under. On Linux, SCHED_BATCH: a thread
// woken by another (an executor by the acceptor's calls, the acceptor by its answers, either by V8's
// helpers) waits for the running thread's time slice instead of preempting it, so a hand-off between
// threads is not a context switch each time. At 32 callers the p99 was lower in every round, inline and
// pooled (10.5 against 15.7 ms and 11.0 against 13.7 at the medians), pooled calls per CPU-s higher in 2 rounds
// of 3 (+7-9%), inline's the same within the noise (bench/results/levers-2026-12-05-batch-scheduling).
// Node has no call for sched_setscheduler: util-linux's chrt makes it, for every thread the process has
// (--all-tasks); threads started later (executors, libuv's and V8's helpers) inherit it. It changes no
// priority (nice stays), and needs no privilege.
import { execFileSync } from 'node:child_process';

/** Linux: puts every thread of this process under SCHED_BATCH; null when done, else why not (the threads keep their policy). */
export function batchScheduling(): string | null {
  try {
    execFileSync('chrt', ['--all-tasks', '--batch', '--pid', '0', String(process.pid)], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 5000 });
    return null;
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stderr?: Buffer };
    if (err.code === 'ENOENT') return 'chrt (util-linux) is not installed';
    return (err.stderr?.toString().trim() || err.message).split('\n')[0];
  }
}
