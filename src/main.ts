#!/usr/bin/env node
// The `queryapigate` command: `serve` runs the gateway (the default); `examples load` installs the
// bundled example APIs into the store. Configuration comes from QUERYAPIGATE_* variables only.
import { ConfigError, loadConfig } from './config.js';
import { loadExamples } from './examples/load.js';
import { startServer } from './serve.js';
import { openStore } from './store/store.js';
import { StoreTooNewError } from './store/migrations.js';

async function main(argv: string[]): Promise<void> {
  const [command = 'serve', sub] = argv;
  const config = loadConfig();
  if (command === 'serve') {
    const server = await startServer(config);
    const base = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${server.port}`;
    console.log(
      `QueryAPIGate listening on ${base} (store: ${config.databaseUrl ? 'PostgreSQL' : `SQLite in ${config.home}`}, ` +
        `executors: ${config.workers || 'inline'})`,
    );
    if (config.loadExamples) {
      console.log(`Try: curl -H 'X-API-Key: <example-partner key>' '${base}/q/example_film_lookup?film_id=7'`);
    }
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      process.once(signal, () => {
        console.log(`${signal}: finishing calls in flight, then stopping`);
        server.stop().then(
          () => process.exit(0),
          (e) => {
            console.error('shutdown failed:', e);
            process.exit(1);
          },
        );
      });
    }
    return;
  }
  if (command === 'examples' && sub === 'load') {
    const store = await openStore(config);
    const loaded = await loadExamples(store, config.home);
    for (const k of loaded.createdKeys) console.log(`Example key ${k.name} (shown once): ${k.secret}`);
    console.log(`Examples loaded: ${loaded.createdQueries} queries created, ${loaded.createdKeys.length} keys created.`);
    await store.close();
    return;
  }
  console.error('usage: queryapigate [serve | examples load]');
  process.exit(2);
}

main(process.argv.slice(2)).catch((e) => {
  if (e instanceof ConfigError || e instanceof StoreTooNewError) console.error(e.message);
  else console.error(e);
  process.exit(1);
});
