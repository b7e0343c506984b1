// PostGraphile 4 as its docs run it in production: the library mode middleware on node:http, with
// the options its "production" page lists (no query log, no GraphiQL, dynamic JSON). Started by
// bench/peers.ts from the folder the peers were installed into (so `postgraphile` resolves there).
//   node postgraphile.mjs <database url> [schema=public]
import { createServer } from 'node:http';
import { postgraphile } from 'postgraphile';

const [url, schema = 'public'] = process.argv.slice(2);
const handler = postgraphile(url, schema, {
  retryOnInitFail: false,
  dynamicJson: true,
  setofFunctionsContainNulls: false,
  ignoreRBAC: false,
  disableQueryLog: true,
  legacyRelations: 'omit',
  graphiql: false,
  subscriptions: false,
});
const server = createServer(handler);
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}`));
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  process.exit(0);
});
