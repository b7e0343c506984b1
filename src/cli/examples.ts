// In charge of `queryapigate examples`: installing the bundled example APIs into the store (load,
// idempotent, the new keys' secrets printed once) and taking them out again (unload: the saved
// queries, keys and connection marked as examples, nothing a user made).
import { auditExamplesLoaded } from '../api/audited.js';
import { EXAMPLE_CONNECTION } from '../examples/catalog.js';
import { EXAMPLES_DB_FILE } from '../examples/dataset.js';
import { loadExamples, unloadExamples } from '../examples/load.js';
import { withLocal } from './local.js';
import { printJson } from './print.js';
import { type Command, type Group, JSON_OUTPUT } from './tree.js';

const load: Command = {
  kind: 'command',
  name: 'load',
  summary: 'Install the example APIs (a SQLite dataset, its connection, saved queries, one key per collection)',
  usage: '[options]',
  description: [
    'Idempotent: what exists already is left as it is. Each key it creates is printed once, with its',
    "secret, on stdout ('Example key NAME (shown once): SECRET').",
  ],
  args: { min: 0, max: 0 },
  options: { json: JSON_OUTPUT },
  examples: ['queryapigate examples load', 'queryapigate examples load --json | jq -r \'.created_keys[] | .name + " " + .secret\''],
  run: (inv) =>
    withLocal(inv.say, async (local, config) => {
      const loaded = await loadExamples(local.store, config.home);
      await auditExamplesLoaded({ store: local.store, config }, { name: 'cli', role: 'owner', via: 'cli' }, loaded);
      if (loaded.createdQueries || loaded.createdKeys.length) local.changed();
      if (inv.values.json) printJson(inv.out, { created_queries: loaded.createdQueries, created_keys: loaded.createdKeys });
      else for (const k of loaded.createdKeys) inv.out(`Example key ${k.name} (shown once): ${k.secret}  queries: ${k.queries.join(', ')}`);
      inv.say(`examples loaded: ${loaded.createdQueries} queries created, ${loaded.createdKeys.length} keys created`);
    }),
};

const unload: Command = {
  kind: 'command',
  name: 'unload',
  summary: 'Remove the example queries, keys and connection that load created',
  usage: '[options]',
  description: [
    'Only rows marked as examples are removed (queries, keys, roles): one of your own is never touched, even one',
    `named like an example. The '${EXAMPLE_CONNECTION}' connection stays while a query of your own still uses it.`,
    `The dataset file (${EXAMPLES_DB_FILE} in QUERYAPIGATE_HOME) is left in place.`,
  ],
  args: { min: 0, max: 0 },
  options: { json: JSON_OUTPUT },
  examples: ['queryapigate examples unload'],
  run: (inv) =>
    withLocal(inv.say, async (local) => {
      // The same unload as DELETE /api/v1/examples; running servers are told once it is done.
      const { removed, connectionKeptFor: kept } = await unloadExamples(local.store);
      if (removed.connection) local.changed({ kind: 'connection', name: removed.connection });
      else if (removed.queries.length || removed.keys.length || removed.roles.length) local.changed();
      if (inv.values.json) printJson(inv.out, { removed_queries: removed.queries, removed_keys: removed.keys, removed_connection: removed.connection });
      inv.say(
        `examples unloaded: ${removed.queries.length} queries and ${removed.keys.length} keys removed${removed.connection ? ', and the connection' : ''}`,
      );
      if (kept.length) inv.say(`the '${EXAMPLE_CONNECTION}' connection is kept: ${kept.join(', ')} still use it`);
    }),
};

export const EXAMPLES: Group = {
  kind: 'group',
  name: 'examples',
  summary: 'Install or remove the bundled example APIs',
  children: [load, unload],
  examples: ['queryapigate examples load', 'queryapigate examples unload'],
};
