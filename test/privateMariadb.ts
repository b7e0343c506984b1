// A MariaDB server of the test's own (mariadb-install-db in a temporary folder, its own port), for a
// server setting the shared one must not change (a global sql_mode would reach every other suite).
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import mysql from 'mysql2/promise';
import { freePort } from './faultRig.js';

const run = promisify(execFile);

export interface PrivateMariadb {
  port: number;
  destroy(): Promise<void>;
}

/** Starts a MariaDB whose global sql_mode is `sqlMode`; root without a password on 127.0.0.1. */
export async function startPrivateMariadb(sqlMode: string): Promise<PrivateMariadb> {
  const dir = mkdtempSync(join(tmpdir(), 'qag-mariadb-'));
  const data = join(dir, 'data');
  await run('mariadb-install-db', ['--no-defaults', `--datadir=${data}`, '--user=root', '--auth-root-authentication-method=normal', '--skip-test-db']);
  const port = await freePort();
  const child = spawn(
    'mariadbd',
    [
      '--no-defaults',
      `--datadir=${data}`,
      '--user=root',
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      `--socket=${join(dir, 'sock')}`,
      `--pid-file=${join(dir, 'pid')}`,
      '--skip-log-bin',
      `--sql-mode=${sqlMode}`,
      '--innodb-buffer-pool-size=16M',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr.on('data', (d) => (log += d));
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const c = await mysql.createConnection({ host: '127.0.0.1', port, user: 'root' });
      await c.end();
      break;
    } catch (e) {
      if (Date.now() > deadline || child.exitCode !== null) {
        child.kill('SIGKILL');
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`the private MariaDB did not start: ${(e as Error).message}\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    port,
    async destroy() {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
