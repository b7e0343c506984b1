// The benches' small C programs (bench/openloop, bench/delayproxy): each built with `cc -O2` on first
// use into ~/.cache/queryapigate-bench-c/<source hash>/, so a changed source is built again.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The path of the built program for `bench/<name>/<name>.c`, building it when missing. */
export function builtC(name: string): string {
  const source = fileURLToPath(new URL(`../../bench/${name}/${name}.c`, import.meta.url));
  const hash = createHash('sha256').update(readFileSync(source)).digest('hex').slice(0, 16);
  const dir = join(homedir(), '.cache', 'queryapigate-bench-c', hash);
  const bin = join(dir, basename(name));
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true });
    const tmp = `${bin}.${process.pid}`;
    execFileSync('cc', ['-O2', '-Wall', '-o', tmp, source], { stdio: 'inherit' });
    renameSync(tmp, bin); // whole or absent, when two benches build at once
  }
  return bin;
}
