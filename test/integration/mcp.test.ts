// MCP over Streamable HTTP at /mcp with the SDK's own Client, on real PostgreSQL and MariaDB, in a
// pooled executor (the named task) and inline: a key lists exactly the tools it may call, a masked
// query answers hashes, a write and a forbidden table are refused, rows are capped with the cut said,
// and every call is in history with transport "mcp"; GET /api/v1/mcp/tools for administrators.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import mysql from 'mysql2/promise';
import { eventually, scratchDatabase, startTestServer, type TestServer } from '../helpers.js';

const HEX16 = /^[0-9a-f]{16}$/;
const MAIN = fileURLToPath(new URL('../../src/main.js', import.meta.url));
const SETUP = `CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, email VARCHAR(40));
  INSERT INTO customers VALUES (1, 'ann', 'ann@example.com'), (2, 'bob', 'bob@example.com'), (3, 'cy', 'cy@example.com');
  CREATE TABLE secrets (id INT PRIMARY KEY, top VARCHAR(20));
  INSERT INTO secrets VALUES (1, 'launch codes');`;

let pg: Awaited<ReturnType<typeof scratchDatabase>>;
let my: mysql.Connection;
const myDb = `qag_mcp_${process.pid}`;

before(async () => {
  pg = await scratchDatabase('qag_mcp');
  await pg.sql.unsafe(SETUP);
  my = await mysql.createConnection({ host: '127.0.0.1', user: 'root', multipleStatements: true });
  await my.query(`CREATE DATABASE ${myDb}; USE ${myDb}; ${SETUP}`);
});
after(async () => {
  await pg?.drop();
  await my?.query(`DROP DATABASE IF EXISTS ${myDb}`);
  await my?.end();
});

/** An SDK client connected to the server's /mcp with this key. */
async function connect(s: TestServer, key: string): Promise<Client> {
  const client = new Client({ name: 'queryapigate-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`), { requestInit: { headers: { 'X-API-Key': key } } }));
  return client;
}

// biome-ignore lint/suspicious/noExplicitAny: tool results are read as the JSON they are
type Result = any;

for (const workers of ['1', '0']) {
  describe(`MCP over Streamable HTTP (QUERYAPIGATE_WORKERS=${workers})`, () => {
    let s: TestServer;
    const keys: Record<string, string> = {};
    const clients: Client[] = [];
    const as = async (name: string) => {
      const c = await connect(s, keys[name]);
      clients.push(c);
      return c;
    };
    before(async () => {
      s = await startTestServer({ QUERYAPIGATE_WORKERS: workers, QUERYAPIGATE_ALLOW_WRITES: '1', QUERYAPIGATE_MCP_MAX_ROWS: '50' });
      const made = [
        await s.call('POST', '/api/v1/connections', {
          body: { name: 'pg', db: 'postgres', host: '127.0.0.1', port: 5432, database: pg.name, user: 'postgres' },
        }),
        await s.call('POST', '/api/v1/connections', { body: { name: 'my', db: 'mysql', host: '127.0.0.1', port: 3306, database: myDb, user: 'root' } }),
      ];
      const query = (name: string, sql: string, extra: Record<string, unknown> = {}) =>
        s.call('POST', '/api/v1/queries', { body: { name, connection_name: 'pg', description: `About ${name}`, publish: true, sql, ...extra } });
      made.push(
        await query('customer_emails', 'SELECT id, email FROM customers ORDER BY id'),
        await query('customer by id', 'SELECT id, name FROM customers WHERE id = :id', {
          parameters: { id: { type: 'integer', min: 1, description: 'The customer' } },
        }),
        await query('secret_list', 'SELECT top FROM secrets'),
        await query('delete_customer', 'DELETE FROM customers WHERE id = :id', { parameters: { id: { type: 'integer' } } }),
        await query('many_rows', 'SELECT n FROM generate_series(1, 120) AS g(n)'),
        await query('draft_only', 'SELECT 1 AS one', { publish: false }),
      );
      for (const r of made) assert.ok(r.status < 300, r.text);
      const key = async (name: string, grants: Record<string, unknown>) => {
        const r = await s.call('POST', '/api/v1/api-keys', { body: { name, ...grants } });
        assert.equal(r.status, 201, r.text);
        keys[name] = r.json.secret;
      };
      await key('reader', { connections: ['pg', 'my'], allowed_tables: ['customers'], mask: [{ column: 'customers.email', action: 'hash' }] });
      await key('queries-only', { queries: ['customer by id'], connections: [] });
      await key('dropper', { connections: ['my'], mask: [{ column: '*.email', action: 'drop' }] });
    });
    after(async () => {
      for (const c of clients) await c.close().catch(() => undefined);
      await s?.stop();
    });

    test('a key lists exactly the tools it may call', async () => {
      const reader = await as('reader');
      const { tools } = await reader.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), ['customer_by_id', 'customer_emails', 'execute_sql', 'list_tables', 'many_rows']);
      const byId = tools.find((t) => t.name === 'customer_by_id');
      assert.equal(byId?.description, 'About customer by id');
      assert.deepEqual(byId?.inputSchema, {
        type: 'object',
        properties: { id: { type: 'integer', minimum: 1, description: 'The customer' } },
        required: ['id'],
        additionalProperties: false,
      });
      assert.equal(byId?.annotations?.readOnlyHint, true);
      const only = await as('queries-only');
      assert.deepEqual(
        (await only.listTools()).tools.map((t) => t.name),
        ['customer_by_id'],
      );
    });

    test('a masked query answers hashes; parameters are bound and checked', async () => {
      const reader = await as('reader');
      const r: Result = await reader.callTool({ name: 'customer_emails', arguments: {} });
      assert.equal(r.isError, undefined, JSON.stringify(r));
      assert.equal(r.structuredContent.rows.length, 3);
      for (const row of r.structuredContent.rows) assert.match(row.email, HEX16);
      assert.doesNotMatch(JSON.stringify(r), /example\.com/);
      const one: Result = await reader.callTool({ name: 'customer_by_id', arguments: { id: 2 } });
      assert.deepEqual(one.structuredContent, { rows: [{ id: 2, name: 'bob' }], truncated: false });
      const bad: Result = await reader.callTool({ name: 'customer_by_id', arguments: { id: 0 } });
      assert.equal(bad.isError, true);
      assert.equal(bad.structuredContent.code, 'param_invalid');
    });

    test('rows are capped at QUERYAPIGATE_MCP_MAX_ROWS and the cut is said', async () => {
      const reader = await as('reader');
      const r: Result = await reader.callTool({ name: 'many_rows', arguments: {} });
      assert.equal(r.structuredContent.rows.length, 50);
      assert.equal(r.structuredContent.truncated, true);
      assert.match(r.content[0].text, /first 50 rows/);
      const small: Result = await reader.callTool({
        name: 'execute_sql',
        arguments: { connection_name: 'pg', sql: 'SELECT id FROM customers ORDER BY id', page_size: 2 },
      });
      assert.deepEqual(small.structuredContent, { rows: [{ id: 1 }, { id: 2 }], truncated: true });
    });

    test('execute_sql is governed: masks, forbidden tables, writes refused for a key that may not write', async () => {
      const reader = await as('reader');
      for (const connection_name of ['pg', 'my']) {
        const ok: Result = await reader.callTool({
          name: 'execute_sql',
          arguments: { connection_name, sql: 'SELECT lower(email) AS e FROM customers WHERE id = :id', params: { id: 1 } },
        });
        assert.equal(ok.isError, undefined, JSON.stringify(ok));
        assert.match(ok.structuredContent.rows[0].e, HEX16);
        const forbidden: Result = await reader.callTool({ name: 'execute_sql', arguments: { connection_name, sql: 'SELECT top FROM secrets' } });
        assert.equal(forbidden.isError, true);
        assert.equal(forbidden.structuredContent.code, 'table_not_allowed');
        assert.doesNotMatch(JSON.stringify(forbidden), /launch/);
        const write: Result = await reader.callTool({ name: 'execute_sql', arguments: { connection_name, sql: 'DELETE FROM customers' } });
        assert.equal(write.isError, true);
        assert.equal(write.structuredContent.code, 'read_only');
      }
      const savedWrite: Result = await reader.callTool({ name: 'delete_customer', arguments: { id: 1 } });
      assert.equal(savedWrite.isError, true);
      assert.equal(savedWrite.structuredContent.code, 'read_only');
      assert.equal((await pg.sql`SELECT count(*)::int AS n FROM customers`)[0].n, 3);
      const refused: Result = await reader.callTool({ name: 'secret_list', arguments: {} });
      assert.equal(refused.structuredContent.code, 'table_not_allowed');
      const hidden: Result = await (await as('queries-only')).callTool({ name: 'execute_sql', arguments: { connection_name: 'pg', sql: 'SELECT 1' } });
      assert.equal(hidden.isError, true);
      assert.equal(hidden.structuredContent.code, 'not_found');
    });

    test('list_tables shows only the tables the key may read', async () => {
      const r: Result = await (await as('reader')).callTool({ name: 'list_tables', arguments: { connection_name: 'my' } });
      assert.equal(r.isError, undefined, JSON.stringify(r));
      assert.deepEqual(
        r.structuredContent.tables.map((t: { name: string }) => t.name),
        ['customers'],
      );
      assert.deepEqual(r.structuredContent.tables[0].columns[0], { name: 'id', type: 'int' });
      // A masked column says how it is masked; a dropped one, which no answer holds, is not listed.
      const email = r.structuredContent.tables[0].columns.find((c: { name: string }) => c.name === 'email');
      assert.equal(email?.masked, 'hash', JSON.stringify(r.structuredContent));
      const dropped: Result = await (await as('dropper')).callTool({ name: 'list_tables', arguments: { connection_name: 'my' } });
      const listed = dropped.structuredContent.tables.flatMap((t: { columns: Array<{ name: string }> }) => t.columns.map((c) => c.name));
      assert.ok(listed.includes('id'), JSON.stringify(dropped.structuredContent));
      assert.ok(!listed.includes('email'), JSON.stringify(dropped.structuredContent));
    });

    test('tool calls are in history with transport "mcp"', async () => {
      const reader = await as('reader');
      const marker = `/* mcp ${Date.now()} */`;
      await reader.callTool({ name: 'execute_sql', arguments: { connection_name: 'pg', sql: `SELECT id FROM customers ${marker}` } });
      await reader.callTool({ name: 'customer_emails', arguments: {} });
      const adhoc = await eventually(
        () => s.call('GET', '/api/v1/history?kind=adhoc&limit=1000'),
        (r) => r.json.items.some((i: { sql?: string }) => i.sql?.includes(marker)),
      );
      const run = adhoc.json.items.find((i: { sql?: string }) => i.sql?.includes(marker));
      assert.equal(run.transport, 'mcp');
      assert.equal(run.key_name, 'reader');
      assert.equal(run.status, 'success');
      const saved = await s.call('GET', '/api/v1/queries/customer_emails/history');
      const mcpRuns = saved.json.items.filter((i: { transport: string }) => i.transport === 'mcp');
      assert.ok(mcpRuns.length >= 1, saved.text);
      assert.deepEqual(mcpRuns[0].masked, [{ column: 'email', action: 'hash' }]);
    });

    test('over stdio (queryapigate mcp, relayed to /mcp): the same tools, masks and refusals, in history as mcp', async () => {
      const client = new Client({ name: 'queryapigate-stdio-test', version: '1.0.0' });
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [MAIN, 'mcp', '--url', s.url, '--key', keys.reader],
        env: { PATH: process.env.PATH ?? '' },
        cwd: s.home,
        stderr: 'pipe',
      });
      await client.connect(transport);
      try {
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((t) => t.name).sort(), ['customer_by_id', 'customer_emails', 'execute_sql', 'list_tables', 'many_rows']);
        const masked: Result = await client.callTool({ name: 'customer_emails', arguments: {} });
        for (const row of masked.structuredContent.rows) assert.match(row.email, HEX16);
        const marker = `/* stdio ${Date.now()} */`;
        const forbidden: Result = await client.callTool({
          name: 'execute_sql',
          arguments: { connection_name: 'pg', sql: `SELECT top FROM secrets ${marker}` },
        });
        assert.equal(forbidden.structuredContent.code, 'table_not_allowed');
        const write: Result = await client.callTool({ name: 'delete_customer', arguments: { id: 1 } });
        assert.equal(write.structuredContent.code, 'read_only');
        const h = await eventually(
          () => s.call('GET', '/api/v1/history?kind=adhoc&limit=1000'),
          (r) => r.json.items.some((i: { sql?: string }) => i.sql?.includes(marker)),
        );
        const run = h.json.items.find((i: { sql?: string }) => i.sql?.includes(marker));
        assert.equal(run.transport, 'mcp');
        assert.equal(run.code, 'table_not_allowed');
      } finally {
        await client.close();
      }
    });

    test('over stdio, a query published later is announced (tools/list_changed) and then listed', async () => {
      const client = new Client({ name: 'queryapigate-stdio-watch', version: '1.0.0' });
      let told = 0;
      client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
        told++;
      });
      await client.connect(
        new StdioClientTransport({
          command: process.execPath,
          args: [MAIN, 'mcp', '--url', s.url, '--key', keys.reader, '--watch-seconds', '0.3'],
          env: { PATH: process.env.PATH ?? '' },
          cwd: s.home,
          stderr: 'pipe',
        }),
      );
      try {
        assert.equal(client.getServerCapabilities()?.tools?.listChanged, true);
        const before = (await client.listTools()).tools.map((t) => t.name);
        assert.ok(!before.includes('newly_published'));
        await new Promise((r) => setTimeout(r, 900)); // unchanged: nothing is said
        assert.equal(told, 0);
        const made = await s.call('POST', '/api/v1/queries', {
          body: { name: 'newly_published', connection_name: 'pg', description: 'Later', publish: true, sql: 'SELECT id FROM customers' },
        });
        assert.equal(made.status, 201, made.text);
        assert.ok(
          (await eventually(
            async () => told,
            (n) => n > 0,
          )) > 0,
          'no tools/list_changed within 5 s',
        );
        assert.ok((await client.listTools()).tools.some((t) => t.name === 'newly_published'));
        assert.equal(told, 1);
      } finally {
        await client.close();
        await s.call('DELETE', '/api/v1/queries/newly_published');
      }
    });

    test('HTTP: a key is required, only POST is served, administrators list every tool', async () => {
      const none = await s.call('POST', '/mcp', { key: null, body: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
      assert.equal(none.status, 401);
      assert.equal(none.json.code, 'unauthorized');
      const get = await s.call('GET', '/mcp', { key: keys.reader });
      assert.equal(get.status, 405);
      assert.equal(get.headers.get('Allow'), 'POST');
      const listing = await s.call('GET', '/api/v1/mcp/tools');
      assert.equal(listing.status, 200, listing.text);
      const byName = Object.fromEntries(listing.json.items.map((t: { name: string }) => [t.name, t]));
      assert.deepEqual(byName.delete_customer, {
        name: 'delete_customer',
        description: 'About delete_customer',
        kind: 'saved query',
        params: ['id'],
        read_only: false,
      });
      assert.equal(byName.execute_sql.kind, 'ad-hoc');
      assert.equal(byName.execute_sql.read_only, false);
      assert.equal(byName.secret_list.read_only, true);
      assert.equal(byName.draft_only, undefined);
      assert.equal((await s.call('GET', '/api/v1/mcp/tools', { key: keys.reader })).json.code, 'admin_only');
    });
  });
}
