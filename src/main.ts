#!/usr/bin/env node
// The `queryapigate` command's entry: hands the command line to the command tree (src/cli) and
// exits with its code. `serve` keeps the process alive until a signal stops it. The first line gives node no flag
// (serve.ts GC_FLAG is npm start's and the image's): `env -S`, which would, is not in every `env` (BusyBox's).
import { runCli } from './cli/run.js';

runCli(process.argv.slice(2)).then((code) => {
  // A failure exits at once: a server that failed half-way (say, its port was taken) has threads
  // and timers running that would otherwise keep the process alive. Success ends on its own.
  if (code !== 0) process.exit(code);
});
