// Packages a bench measures next to the gateway but the project must not depend on (the peers, other
// drivers): installed from their own folder's lock file with `npm ci` into ~/.cache/<name>/<lock hash>,
// never into the project, and reused while the lock is the same.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** Runs a command to its end; its output (stdout and stderr), or an error with the output's tail. */
export function runCommand(cmd: string, args: string[], env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${cmd} ${args.join(' ')}: exit ${code}\n${out.slice(-3000)}`))));
  });
}

/**
 * `npm ci` of `src` (its package.json and package-lock.json) into ~/.cache/`cacheName`/<lock hash>;
 * the `launchers` (files of `src` that import the installed packages) are copied in on every call,
 * so they run from the install folder. Returns that folder.
 */
export async function installLocked(src: string, cacheName: string, launchers: string[]): Promise<string> {
  const lock = readFileSync(join(src, 'package-lock.json'));
  const hash = createHash('sha256').update(lock).digest('hex').slice(0, 16);
  const cacheRoot = join(homedir(), '.cache', cacheName);
  const dir = join(cacheRoot, hash);
  if (!existsSync(join(dir, '.installed'))) {
    mkdirSync(cacheRoot, { recursive: true });
    const tmp = mkdtempSync(join(cacheRoot, `tmp-${hash}-`));
    for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(src, f), join(tmp, f));
    console.log(`npm ci --prefix ${tmp} (lock ${hash}; cached in ${dir} afterwards)`);
    // No install scripts: the only one that matters among the peers, better-sqlite3's native build
    // (Platformatic's SQLite driver, unused here), needs a download this machine cannot make.
    try {
      await runCommand('npm', ['ci', '--prefix', tmp, '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error']);
    } catch (e) {
      rmSync(tmp, { recursive: true, force: true });
      throw e;
    }
    writeFileSync(join(tmp, '.installed'), `${new Date().toISOString()}\n`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  }
  for (const f of launchers) copyFileSync(join(src, f), join(dir, f));
  return dir;
}

/** The version of `pkg` installed in `dir`. */
export const installedVersion = (dir: string, pkg: string): string =>
  (JSON.parse(readFileSync(join(dir, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;
