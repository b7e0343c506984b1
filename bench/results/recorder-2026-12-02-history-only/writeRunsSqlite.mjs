// A/B of Store.writeRuns on PostgreSQL: dist-before against dist-final, alternating, same database; backend CPU from /proc.
import { readFileSync } from 'node:fs';
import { mkdtempSync } from 'node:fs'; import { tmpdir } from 'node:os'; import { join } from 'node:path';
const builds = { before: '/work/wt-recorder/dist-before', final: '/work/wt-recorder/dist-final' };
const file = join(mkdtempSync(join(tmpdir(), 'qag-ab-')), 'q.db');
const stores = {};
for (const [k, d] of Object.entries(builds)) {
  const { openSqlite } = await import(`${d}/src/store/sql.js`); const { Store } = await import(`${d}/src/store/store.js`);
  const db = openSqlite(file); stores[k] = { db, store: new Store(db) };
}
const { migrate } = await import(`${builds.final}/src/store/migrations.js`);
await migrate(stores.final.db);
const fields = (uuid) => ({ sql: 'SELECT 1', connection_name: 'warehouse', parameters: {}, description: '', author: null, tags: [], cache_ttl: null, uuid });
for (let q = 0; q < 50; q++) { const name = `monthly_revenue_${q}`; await stores.final.store.createQuery({ name, collection: null, example: false }, fields(`${name}-1`), true, '2026-11-30 12:00:00'); for (let v = 2; v <= 4; v++) await stores.final.store.addVersion(name, fields(`${name}-${v}`), true, '2026-11-30 12:00:00'); }
await stores.final.store.resizeRings(50);
let id = 1;
const batch = (n) => Array.from({ length: n }, () => { const k = id % 200; return Object.assign({ id: id++ }, { query: `monthly_revenue_${Math.floor(k / 4)}`, version: 1 + (k % 4), kind: 'saved', executed_at: '2026-11-30 12:00:00', status: 'success', connection_name: 'warehouse', key_name: `mobile-key-${k}`, request_id: id.toString(16).padStart(12, '0'), rows: k, duration_ms: 3, serialization_ms: 0.1, transport: 'rest' }); });
const tick = Number(readFileSync('/proc/self/stat', 'utf8').split(' ')[0]) && 100;

const cpu = (ps) => ps.reduce((s, p) => { const f = readFileSync(`/proc/${p}/stat`, 'utf8'); const x = f.slice(f.lastIndexOf(')') + 2).split(' '); return s + (Number(x[11]) + Number(x[12])) / tick; }, 0);
for (const k of Object.keys(stores)) await stores[k].store.writeRuns(batch(500), 50);
const ps = [];
const res = {};
for (const size of [500, 5000]) for (let round = 0; round < 4; round++) for (const k of round % 2 ? ['final', 'before'] : ['before', 'final']) {
  const n = size === 500 ? 60 : 8; const runs = Array.from({ length: n }, () => batch(size));
  const s0 = cpu(ps), c0 = process.cpuUsage();
  for (const b of runs) await stores[k].store.writeRuns(b, 50);
  const c = process.cpuUsage(c0), s1 = cpu(ps);
  (res[`${k} ${size}`] ??= []).push(`client ${((c.user + c.system) / (n * size)).toFixed(1)} server ${(((s1 - s0) * 1e6) / (n * size)).toFixed(1)}`);
}
for (const [k, v] of Object.entries(res)) console.log(k.padEnd(12), v.join(' | '));
for (const k of Object.keys(stores)) await stores[k].db.close();

