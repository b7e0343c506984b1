// NOT A PRODUCT: loaded with --import into a test server (and so into each of its threads): an executor thread fails,
// with an error nothing catches, once the file QAG_TEST_FAIL_EXECUTOR names appears (it is removed first, so once).
import { existsSync, rmSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';

const file = process.env.QAG_TEST_FAIL_EXECUTOR;
if (file && !isMainThread) {
  const timer = setInterval(() => {
    if (!existsSync(file)) return;
    rmSync(file, { force: true });
    clearInterval(timer);
    throw new Error('this executor fails (test/failExecutor.ts)');
  }, 20);
  timer.unref();
}
