// NOT A PRODUCT: a hand-written floor for bench/oltp.ts. node:http + postgres.js in one process,
// answering only GET /q/account?aid=N with the same lookup the gateway serves, no key, no record.
// Clients with max: 1, used in turn (DESIGN's postgres.js trap: never one client with 32 in flight).
//   node dist/bench/floor.js [postgres://postgres@127.0.0.1:5432/qag_oltp_bench] [clients=8] [batch]
// `batch`: every thread under SCHED_BATCH first, as the gateway runs its own (src/scheduling.ts).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import postgres from 'postgres';
import { batchScheduling } from '../src/scheduling.js';

if (process.argv[4] === 'batch') {
  const whyNot = batchScheduling();
  if (whyNot) throw new Error(`SCHED_BATCH: ${whyNot}`);
}

const url = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench';
const clients = Array.from({ length: Number(process.argv[3] ?? 8) }, () =>
  postgres(url, { max: 1, prepare: true, fetch_types: false, idle_timeout: 60, onnotice: () => undefined }),
);
let next = 0;

const server = createServer(async (req, res) => {
  const u = new URL(req.url ?? '/', 'http://floor');
  const aid = Number(u.searchParams.get('aid'));
  if (u.pathname !== '/q/account' || !Number.isSafeInteger(aid)) return void res.writeHead(404).end('{"error":"Not found"}');
  const sql = clients[next];
  next = (next + 1) % clients.length;
  try {
    const rows = await sql`SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = ${aid}`;
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(rows));
  } catch (e) {
    res.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: (e as Error).message }));
  }
});
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`));
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void Promise.all(clients.map((c) => c.end({ timeout: 2 }))).then(() => process.exit(0));
});
