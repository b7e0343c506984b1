// NOT A PRODUCT: the floor of bench/floor.ts on uWebSockets.js instead of node:http. The same lookup
// through postgres.js (clients with max: 1, used in turn), no key, no record: the gateway's own HTTP
// server and driver with none of its work, so bench/threads.ts can tell what the stack costs from what
// the gateway adds.
//   node dist/bench/floorUws.js [postgres://postgres@127.0.0.1:5432/qag_oltp_bench] [clients=8]
import postgres from 'postgres';
import uWS from 'uWebSockets.js';

const url = process.argv[2] ?? 'postgres://postgres@127.0.0.1:5432/qag_oltp_bench';
const clients = Array.from({ length: Number(process.argv[3] ?? 8) }, () =>
  postgres(url, { max: 1, prepare: true, fetch_types: false, idle_timeout: 60, onnotice: () => undefined }),
);
let next = 0;

const app = uWS.App().get('/q/account', (res, req) => {
  const aid = Number(new URLSearchParams(req.getQuery() ?? '').get('aid'));
  if (!Number.isSafeInteger(aid)) return void res.writeStatus('404 Not Found').end('{"error":"Not found"}');
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  const sql = clients[next]!;
  next = (next + 1) % clients.length;
  const answer = (status: string, body: string) => {
    if (!aborted) res.cork(() => res.writeStatus(status).writeHeader('Content-Type', 'application/json').end(body));
  };
  sql`SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = ${aid}`.then(
    (rows) => answer('200 OK', JSON.stringify(rows)),
    (e: Error) => answer('500 Internal Server Error', JSON.stringify({ error: e.message })),
  );
});
let listening: uWS.us_listen_socket | false = false;
app.listen('127.0.0.1', 0, (token) => {
  if (!token) process.exit(1);
  listening = token;
  console.log(`listening on http://127.0.0.1:${uWS.us_socket_local_port(token)}`);
});
process.on('SIGTERM', () => {
  if (listening) uWS.us_listen_socket_close(listening);
  void Promise.all(clients.map((c) => c.end({ timeout: 2 }))).then(() => process.exit(0));
});
