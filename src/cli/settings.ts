// In charge of the configuration a command runs with: the `.env` file of the current folder first
// (only variables not already set: the environment wins, as with node --env-file), then the
// QUERYAPIGATE_* variables through loadConfig, exactly as the server reads them; and of naming the
// store a command uses without printing a secret.
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import * as util from 'node:util';
import { type Config, loadConfig } from '../config.js';

export const ENV_FILE = '.env';

/** Reads ./.env into process.env (never over a variable already set) and says what it did; then the config. */
export function commandConfig(say: (line: string) => void, folder = process.cwd()): Config {
  const file = resolve(folder, ENV_FILE);
  if (existsSync(file)) {
    // util.parseEnv is the parser of process.loadEnvFile and --env-file (Node 20.12+), used directly to
    // tell which variables came from the file and which were kept from the environment.
    const parseEnv = (util as { parseEnv?: (text: string) => Record<string, string> }).parseEnv;
    if (!parseEnv) say(`${file} not read: reading .env needs Node 20.12 or later`);
    else {
      const entries = Object.entries(parseEnv(readFileSync(file, 'utf8')));
      const kept = entries.filter(([k]) => process.env[k] !== undefined).map(([k]) => k);
      for (const [k, v] of entries) process.env[k] ??= v;
      say(`read ${file}: ${entries.length - kept.length} variable(s) set${kept.length ? `, ${kept.join(', ')} kept from the environment` : ''}`);
    }
  }
  return loadConfig();
}

/** "SQLite /home/x/queryapigate.db" or "PostgreSQL postgres://user@host:5432/db" (no password). */
export { describeStore as storeName, redactUrl } from '../store/describe.js';
