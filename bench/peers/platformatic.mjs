// Platformatic DB 2 on a PostgreSQL database: its REST API (OpenAPI on, GraphQL off, no
// authorization rules so every route is open), logger at warn so requests are not logged, started
// through its own buildServer as `plt-db start` does. Started by bench/peers.ts from the folder the
// peers were installed into (so `@platformatic/db` resolves there).
//   node platformatic.mjs <database url>
import { buildServer } from '@platformatic/db';

const app = await buildServer({
  server: { hostname: '127.0.0.1', port: 0, logger: { level: 'warn' } },
  db: { connectionString: process.argv[2], openapi: true, graphql: false, events: false },
});
const url = await app.start();
console.log(`listening on ${url}`);
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
