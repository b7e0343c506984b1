// In charge of the two routes that read a saved connection's database for an administrator: its
// schema (GET /api/v1/connections/{name}/schema: tables and views, columns, types, primary and foreign keys) and a
// probe (POST /api/v1/connections/{name}/test: reachable, server version, whether read sessions are
// read-only). Each opens a short-lived source of one connection, as save checks do, and gives it 5 s.
import { sourceSettings } from '../call/context.js';
import { GatewayError } from '../contract/errors.js';
import { jsonAnswer } from '../contract/exchange.js';
import { addForeignKeys, browseQuery, foreignKeysQuery, toBrowsed } from '../governance/schema.js';
import { openSource } from '../sources/index.js';
import type { Dialect, Source } from '../sources/types.js';
import type { ConnectionRow } from '../store/types.js';
import { NOTHING_CHANGED, type ApiRouter, type ControlContext } from './routes.js';

const PROBE_TIMEOUT_MS = 5000;
const READ = { timeoutMs: PROBE_TIMEOUT_MS, readOnly: true };

export function connectionProbeRoutes(r: ApiRouter): void {
  r.add('GET', '/api/v1/connections/:name/schema', async (ctx, _req, [n]) => {
    const browsed = await withSource(ctx, await saved(ctx, n), async (source) => {
      const found = toBrowsed((await source.run(browseQuery(source.dialect), [], READ)).rows);
      addForeignKeys(found.tables, (await source.run(foreignKeysQuery(source.dialect), [], READ)).rows);
      return found;
    });
    return jsonAnswer(200, browsed);
  });

  r.add(
    'POST',
    '/api/v1/connections/:name/test',
    async (ctx, _req, [n]) => {
      const started = performance.now();
      const facts = await withSource(ctx, await saved(ctx, n), probe);
      return jsonAnswer(200, { reachable: true, ...facts, elapsed_ms: Math.round((performance.now() - started) * 10) / 10 });
    },
    NOTHING_CHANGED,
  );
}

async function saved(ctx: ControlContext, name: string): Promise<ConnectionRow> {
  const c = await ctx.store.getConnection(name);
  if (!c) throw new GatewayError('connection_not_found', `Connection '${name}' not found`);
  return c;
}

/** Runs `use` on a source of one connection opened for it, closed after; past 5 s a query_timeout. */
async function withSource<T>(ctx: ControlContext, conn: ConnectionRow, use: (s: Source) => Promise<T>): Promise<T> {
  const source = openSource(conn, { ...sourceSettings(ctx.config), poolSize: 1 });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new GatewayError('query_timeout', `The database did not answer within ${PROBE_TIMEOUT_MS / 1000} seconds`, { timeout: PROBE_TIMEOUT_MS / 1000 }),
        ),
      PROBE_TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([use(source), late]);
  } finally {
    clearTimeout(timer);
    source.close().catch(() => undefined);
  }
}

/** The server's version, and whether a session the gateway reads through refuses writes, as the database says it. */
async function probe(source: Source): Promise<{ dialect: Dialect; version: string; read_only: boolean }> {
  const one = async (sql: string) => (await source.run(sql, [], READ)).rows[0] ?? [];
  if (source.dialect === 'postgres') {
    const [version, readOnly] = await one("SELECT current_setting('server_version'), current_setting('transaction_read_only')");
    return { dialect: 'postgres', version: String(version), read_only: readOnly === 'on' };
  }
  if (source.dialect === 'mysql') {
    // MariaDB names the setting tx_read_only; MySQL 8 only transaction_read_only.
    const row = await one('SELECT VERSION(), @@session.tx_read_only').catch(() => one('SELECT VERSION(), @@session.transaction_read_only'));
    return { dialect: 'mysql', version: String(row[0]), read_only: Number(row[1]) === 1 };
  }
  // The SQLite source opens its file read-only (mode=ro) for every statement.
  const [version] = await one('SELECT sqlite_version()');
  return { dialect: 'sqlite', version: String(version), read_only: true };
}
