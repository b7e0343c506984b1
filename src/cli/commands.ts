// In charge of the command tree of `queryapigate`: which commands and groups exist, in the order help
// lists them. Each group lives in a file of its own beside this one.
import { ADMINS } from './admins.js';
import { AUDIT } from './audit.js';
import { EVENTS } from './events.js';
import { EXAMPLES } from './examples.js';
import { EXPORT } from './export.js';
import { MCP } from './mcp.js';
import { INIT } from './init.js';
import { KEYS } from './keys.js';
import { QUERIES } from './queries.js';
import { SERVE } from './serve.js';
import { STORE_COPY_COMMANDS } from './storeCopy.js';
import type { Group } from './tree.js';

export const ROOT: Group = {
  kind: 'group',
  name: 'queryapigate',
  summary: 'QueryAPIGate publishes saved SQL queries as governed HTTP APIs.',
  description: [
    'Settings come from QUERYAPIGATE_* variables, and from a .env file in the current folder for those not set.',
    'Exit codes: 0 ok, 1 the command failed (one line on stderr says why), 2 the command line is wrong.',
    'Docs: docs/cli.md.',
  ],
  children: [SERVE, INIT, EXAMPLES, KEYS, ADMINS, QUERIES, EXPORT, EVENTS, MCP, AUDIT, ...STORE_COPY_COMMANDS],
  examples: ['queryapigate init && queryapigate serve', 'queryapigate keys create partner --queries example_film_lookup'],
};
