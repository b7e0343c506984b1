// The `queryapigate` command as a user runs it, for the CLI tests: `node dist/src/main.js ...` as a
// child process with a home folder of its own and no QUERYAPIGATE_* variable but those given.
import assert from 'node:assert/strict';
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

export interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  home: string;
  env?: Record<string, string>;
  cwd?: string;
}

/** The environment without any QUERYAPIGATE_* of the test's own, so only what a test passes counts. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('QUERYAPIGATE_')) env[k] = v;
  return { ...env, ...extra };
}

/** Starts `queryapigate ARGS` in `cwd` (by default the home, so no stray .env is read). */
export function spawnCli(args: string[], opts: CliOptions): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, [MAIN, ...args], {
    cwd: opts.cwd ?? opts.home,
    env: cleanEnv({ QUERYAPIGATE_HOME: opts.home, ...opts.env }),
    stdio: 'pipe',
  });
}

/** Runs `queryapigate ARGS` to its end: exit code, stdout and stderr. */
export function cli(args: string[], opts: CliOptions): Promise<Ran> {
  const child = spawnCli(args, opts);
  child.stdin.end();
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/** The command must have succeeded; its stdout. */
export async function ok(args: string[], opts: CliOptions): Promise<string> {
  const r = await cli(args, opts);
  assert.equal(r.code, 0, `queryapigate ${args.join(' ')} exited ${r.code}:\n${r.stderr}${r.stdout}`);
  return r.stdout;
}

export const tempHome = () => mkdtempSync(join(tmpdir(), 'qag-cli-'));
