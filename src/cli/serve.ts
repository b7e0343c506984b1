// In charge of `queryapigate serve`: the gateway's server with the QUERYAPIGATE_* settings (and
// ./.env, never over a variable already set), stopped cleanly on SIGTERM or SIGINT.
import { startServer } from '../serve.js';
import { logger } from '../log.js';
import { commandConfig } from './settings.js';
import type { Command } from './tree.js';

export const SERVE: Command = {
  kind: 'command',
  name: 'serve',
  summary: 'Run the gateway (the default when no command is given)',
  usage: '',
  description: [
    'Settings come from QUERYAPIGATE_* variables (the table in README.md). A .env file in the current',
    'folder is read first, without replacing variables already set, and the start says so.',
    'SIGTERM or SIGINT stops accepting, finishes calls in flight, flushes history and exits 0.',
  ],
  args: { min: 0, max: 0 },
  options: {},
  examples: ['queryapigate serve', 'QUERYAPIGATE_PORT=8080 QUERYAPIGATE_LOAD_EXAMPLES=1 queryapigate serve'],
  async run(inv) {
    const config = commandConfig(inv.say);
    const server = await startServer(config); // it logs what it did, on stdout
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        logger('serve').info(`${signal}: finishing calls in flight, then stopping`);
        server.stop().then(
          () => process.exit(0),
          (e: Error) => {
            logger('serve').error(`shutdown failed: ${e.message}`);
            process.exit(1);
          },
        );
      });
    }
  },
};
