// NOT A PRODUCT: a hand-written floor for bench/peers.ts on MariaDB, as bench/floor.ts is on
// PostgreSQL. node:http + mysql2 in one process, answering only GET /q/account?aid=N with the same
// lookup the gateway serves, no key, no record. One pool of 10 connections, `pool.execute` (a
// prepared statement per connection, cached by mysql2).
//   node dist/bench/floorMysql.js [mysql://root@127.0.0.1:3306/qag_bench_my] [connections=10]
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import mysql from 'mysql2/promise';

const url = process.argv[2] ?? 'mysql://root@127.0.0.1:3306/qag_bench_my';
const pool = mysql.createPool({ uri: url, connectionLimit: Number(process.argv[3] ?? 10) });

const server = createServer(async (req, res) => {
  const u = new URL(req.url ?? '/', 'http://floor');
  const aid = Number(u.searchParams.get('aid'));
  if (u.pathname !== '/q/account' || !Number.isSafeInteger(aid)) return void res.writeHead(404).end('{"error":"Not found"}');
  try {
    const [rows] = await pool.execute('SELECT aid, bid, abalance FROM pgbench_accounts WHERE aid = ?', [aid]);
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(rows));
  } catch (e) {
    res.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: (e as Error).message }));
  }
});
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`));
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
  void pool.end().then(() => process.exit(0));
});
