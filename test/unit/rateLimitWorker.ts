// Worker for the rate limit tests: takes tokens from the shared bucket table as fast as it can,
// from the moment the test releases a shared start flag, and reports how many it was allowed per
// key. Inert when loaded as the main thread (the test runner loads every file under test/).
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { SharedRateLimiter } from '../../src/auth/sharedBuckets.js';

export interface HammerJob {
  memory: SharedArrayBuffer;
  /** Int32 flag: 0 = wait, 1 = go. */
  start: SharedArrayBuffer;
  keys: string[];
  limit: number;
  periodMs: number;
  rounds: number;
  /** A frozen clock (ms), so refill never blurs the count. */
  now: number;
  /** Walk the keys in a different order in each worker. */
  seed: number;
}

if (!isMainThread && parentPort) {
  const job = workerData as HammerJob;
  const limiter = new SharedRateLimiter(job.memory, () => job.now);
  const flag = new Int32Array(job.start);
  const allowed = new Array<number>(job.keys.length).fill(0);
  parentPort.postMessage({ ready: true });
  Atomics.wait(flag, 0, 0);
  const n = job.keys.length;
  for (let round = 0; round < job.rounds; round++) {
    for (let j = 0; j < n; j++) {
      const k = (j * 7 + job.seed * 13 + round) % n;
      if (limiter.take(job.keys[k], job.limit, job.periodMs).allowed) allowed[k]++;
    }
  }
  parentPort.postMessage({ allowed });
}
