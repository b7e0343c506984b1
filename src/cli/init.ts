// In charge of `queryapigate init`: a starter .env with a freshly generated admin key and the main
// settings commented out at their defaults. Never overwrites a file unless told to, and never prints
// the key (it is in the file, readable by its owner only).
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';
import { ENV_FILE } from './settings.js';
import { type Command, Failure } from './tree.js';
import { packageVersion } from '../contract/version.js';

/** The commented settings: each variable, its default as config.ts has it, and what it does. */
export const STARTER_SETTINGS: Array<[name: string, fallback: string, meaning: string]> = [
  ['QUERYAPIGATE_HOME', '.', 'holds queryapigate.db (the SQLite store) and examples.db'],
  ['QUERYAPIGATE_DATABASE_URL', '', 'postgres://user@host:5432/db: a PostgreSQL store instead, shared by instances'],
  ['QUERYAPIGATE_HOST', '127.0.0.1', 'listen address'],
  ['QUERYAPIGATE_PORT', '5000', 'listen port'],
  ['QUERYAPIGATE_LOAD_EXAMPLES', '0', '1 loads the example APIs at startup'],
  ['QUERYAPIGATE_ALLOW_WRITES', '0', 'server-wide write ceiling: 1 lets keys that allow writes write'],
  ['QUERYAPIGATE_QUERY_TIMEOUT', '30', 'seconds per statement; 0 disables'],
  ['QUERYAPIGATE_MAX_PAGE_SIZE', '1000', 'largest page_size'],
  ['QUERYAPIGATE_WORKERS', '', 'executor threads (default: cores - 1, at least 1); 0 runs calls inline'],
  ['QUERYAPIGATE_METADATA_CACHE_TTL', '0', 'seconds executors keep key, query and connection rows; 0 = off'],
  ['QUERYAPIGATE_REDIS_URL', '', 'redis://host:6379: shared rate limits, response cache and change notices'],
  ['QUERYAPIGATE_RATE_LIMIT', '', 'N/second|minute|hour|day per client address, e.g. 100/second'],
  ['QUERYAPIGATE_TRUST_PROXY', '0', 'trusted X-Forwarded-For hops in front of the server'],
  ['QUERYAPIGATE_HISTORY_LIMIT', '50', 'runs kept per saved-query version'],
  ['QUERYAPIGATE_STREAM_MAX_ROWS', '0', 'row cap for ?stream=true exports; 0 = unbounded'],
];

export function starterEnv(adminKey: string, version: string): string {
  return [
    `# QueryAPIGate settings, written by queryapigate init (version ${version}).`,
    '# `queryapigate serve` and every store command read this file from the current folder;',
    '# a variable already set in the environment wins. Every setting: README.md, "Configuration".',
    '',
    '# The admin key: the management API (/api/v1) and every saved query answer to it. Keep it secret.',
    `QUERYAPIGATE_API_KEY=${adminKey}`,
    '',
    ...STARTER_SETTINGS.map(([name, fallback, meaning]) => `# ${name}=${fallback}${' '.repeat(Math.max(1, 36 - name.length - fallback.length))}# ${meaning}`),
    '',
  ].join('\n');
}

export const INIT: Command = {
  kind: 'command',
  name: 'init',
  summary: 'Write a starter .env with a new admin key',
  usage: '[options]',
  description: [
    'Writes QUERYAPIGATE_API_KEY set to a freshly generated admin key, and the main settings commented',
    'out at their defaults. The file is readable by its owner only; the key is not printed.',
    'An existing file is left alone unless --force is given.',
  ],
  args: { min: 0, max: 0 },
  options: {
    out: { type: 'string', value: 'FILE', help: `where to write (default: ${ENV_FILE} in the current folder)` },
    force: { type: 'boolean', help: 'replace the file if it exists' },
  },
  examples: ['queryapigate init && queryapigate serve', 'queryapigate init --out /etc/queryapigate.env'],
  async run(inv) {
    const file = resolve((inv.values.out as string | undefined) ?? ENV_FILE);
    if (existsSync(file) && !inv.values.force) throw new Failure(`${file} exists; not overwritten (--force replaces it)`);
    const adminKey = `qag_admin_${randomBytes(32).toString('base64url')}`;
    try {
      writeFileSync(file, starterEnv(adminKey, packageVersion()), { mode: 0o600 });
      chmodSync(file, 0o600); // the mode above only applies to a new file
    } catch (e) {
      throw new Failure(`cannot write ${file}: ${(e as Error).message}`);
    }
    inv.out(`Wrote ${file} with a new admin key (QUERYAPIGATE_API_KEY).`);
    const here = relative(process.cwd(), file) === ENV_FILE;
    inv.out(
      here
        ? 'Start the gateway from this folder: queryapigate serve'
        : `Start the gateway with it: set -a; . ${file}; set +a; queryapigate serve  (a .env is read only from the current folder)`,
    );
  },
};
