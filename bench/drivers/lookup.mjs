// NOT A PRODUCT: one driver on the gateway's lookup, run by bench/drivers.ts from the install folder.
// Clients as the gateway's sources/postgres.ts makes them (max: 1 each, prepared statements, no type
// fetch) and picked as its `pick` does (the calls of one turn join one client, up to 16 in flight on
// it; else the least busy), `callers` loops each awaiting its call: the driver's work and the
// database's, without HTTP. Prints one JSON line: queries, the process's CPU µs and the machine's
// (every process's, from /proc/stat: the database's backends too), the window's seconds.
//   node lookup.mjs <package> <postgres url> <seconds> <callers>
import { readFileSync } from 'node:fs';

const [pkg, url, seconds, callers] = process.argv.slice(2);
/** The machine's busy time so far, in µs (USER_HZ is 100 on Linux). */
function machineBusyUs() {
  const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  return (user + nice + system + irq + softirq + steal) * 1e4;
}
const { default: postgres } = await import(pkg);
const POOL = 10;
const JOIN = 16;
const clients = Array.from({ length: POOL }, () => ({ sql: postgres(url, { max: 1, prepare: true, fetch_types: false, onnotice: () => {} }), busy: 0 }));
const text = 'select aid, bid, abalance, filler from pgbench_accounts where aid = $1';
let next = 0;
let joined = null;
function pick() {
  if (joined !== null && joined.busy < JOIN) return joined;
  let best = clients[next];
  next = (next + 1) % POOL;
  for (const c of clients) if (c.busy < best.busy) best = c;
  if (joined === null) setImmediate(() => (joined = null));
  joined = best;
  return best;
}
let queries = 0;
let until = 0;
async function caller() {
  while (Date.now() < until) {
    const c = pick();
    c.busy++;
    await c.sql.unsafe(text, [1 + Math.floor(Math.random() * 999_999)], { prepare: true }).values();
    c.busy--;
    queries++;
  }
}
const loops = () => Promise.all(Array.from({ length: Number(callers) }, caller));
until = Date.now() + 1000; // warm-up: connections opened, statements prepared
await loops();
queries = 0;
const cpu = process.cpuUsage();
const machine = machineBusyUs();
const t0 = performance.now();
until = Date.now() + Number(seconds) * 1000;
await loops();
const used = process.cpuUsage(cpu);
const machineUs = machineBusyUs() - machine;
console.log(JSON.stringify({ queries, cpu_us: used.user + used.system, machine_us: machineUs, seconds: (performance.now() - t0) / 1000 }));
await Promise.all(clients.map((c) => c.sql.end({ timeout: 1 })));
