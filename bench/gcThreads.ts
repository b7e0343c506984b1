// NOT A PRODUCT: what V8's collections do in each thread of a server. Loaded into one with
// `NODE_ARGS=--import=<repo>/dist/bench/gcThreads.js` and `QAG_GC_TAG=<variant>` (bench/levers.ts variants), every
// thread (the acceptor, each executor, a recorder thread: `--import` reaches them all) writes its whole life's pauses by
// kind every second to /tmp/qag-gcthr-<tag>-<pid>-<thread id>-<role>.json. Run as a script, it prints them as a table.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isMainThread, threadId, workerData } from 'node:worker_threads';
import { observePauses, type Pauses } from './gcPauses.js';

const PREFIX = 'qag-gcthr-';

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log('| Server (tag-pid-thread-role) | Kind | Count | Total ms | Longest ms | Over 2 ms |\n|---|---|---|---|---|---|');
  for (const f of readdirSync('/tmp')
    .filter((n) => n.startsWith(PREFIX))
    .sort()) {
    const pauses = JSON.parse(readFileSync(`/tmp/${f}`, 'utf8')) as Pauses;
    for (const [kind, p] of Object.entries(pauses).sort())
      console.log(`| ${f.slice(PREFIX.length, -5)} | ${kind} | ${p.n} | ${p.ms.toFixed(0)} | ${p.maxMs.toFixed(1)} | ${p.over2ms} |`);
  }
} else {
  const pauses = observePauses();
  // A recorder thread's workerData carries its settings; piscina's (an executor's) does not.
  const role = isMainThread ? 'acceptor' : (workerData as { settings?: unknown } | null)?.settings ? 'recorder' : 'executor';
  const file = `/tmp/${PREFIX}${process.env.QAG_GC_TAG ?? 'untagged'}-${process.pid}-${threadId}-${role}.json`;
  // Each second rather than at exit: a terminated worker does not run its exit handlers.
  setInterval(() => writeFileSync(file, JSON.stringify(pauses)), 1000).unref();
}
