// The store's COPY (the event log's and history's way in): its pieces are made a turn of the event loop
// apart, so the calls sharing the recorder's thread do not wait out a whole batch's text; and when the
// server fails it in the same read in which it accepted it, as a PostgreSQL shutting down does (its FATAL
// right behind CopyInResponse), the write fails and the process goes on. A proxy in front of the real
// server puts the FATAL there.
import assert from 'node:assert/strict';
import { type AddressInfo, connect, createServer, type Server } from 'node:net';
import { test } from 'node:test';
import { openPostgres } from '../../src/store/sql.js';
import { scratchDatabase } from '../helpers.js';

/** ErrorResponse: FATAL 57P01, as a server sends it to its sessions when it shuts down. */
function fatal(): Buffer {
  const fields = Buffer.from('SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0');
  const head = Buffer.alloc(5);
  head[0] = 0x45; // 'E'
  head.writeUInt32BE(4 + fields.length, 1);
  return Buffer.concat([head, fields]);
}

/** Passes a connection through to `port`, but writes the FATAL behind the server's first CopyInResponse, in one write, and closes. */
async function fatalAfterCopyIn(port: number): Promise<Server> {
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    client.on('error', () => undefined);
    upstream.on('error', () => undefined);
    client.on('close', () => upstream.destroy());
    client.pipe(upstream);
    let held = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      held = Buffer.concat([held, chunk]);
      const out: Buffer[] = [];
      let at = 0;
      let copying = false;
      // Whole server messages only: a type byte and a length that counts itself.
      while (held.length - at >= 5 && held.length - at >= 1 + held.readUInt32BE(at + 1)) {
        const end = at + 1 + held.readUInt32BE(at + 1);
        out.push(held.subarray(at, end));
        copying = held[at] === 0x47; // 'G': CopyInResponse
        at = end;
        if (copying) break;
      }
      held = held.subarray(at);
      if (copying) {
        client.end(Buffer.concat([...out, fatal()]));
        upstream.destroy();
      } else if (out.length) client.write(Buffer.concat(out));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return server;
}

test('a COPY the server fails in the read that accepted it fails the write, not the process', { timeout: 30_000 }, async () => {
  const scratch = await scratchDatabase('qag_copy_fatal');
  await scratch.sql.unsafe('CREATE TABLE landing (n INTEGER)');
  const upstreamPort = Number(new URL(scratch.url).port || 5432);
  const proxy = await fatalAfterCopyIn(upstreamPort);
  const url = new URL(scratch.url);
  url.host = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  const db = openPostgres(url.toString(), { max: 1 });
  try {
    await assert.rejects(
      db.tx((t) => t.copyIn('COPY landing (n) FROM STDIN', [Buffer.from('1\n2\n')])),
      /cannot reach its store/,
    );
    // Still here, and nothing was written.
    const [{ n }] = await scratch.sql`SELECT count(*)::int AS n FROM landing`;
    assert.equal(n, 0);
  } finally {
    await db.close();
    proxy.close();
    await scratch.drop();
  }
});

test("a COPY's pieces are asked for a turn of the event loop apart, and all arrive", { timeout: 30_000 }, async () => {
  const scratch = await scratchDatabase('qag_copy_turns');
  await scratch.sql.unsafe('CREATE TABLE landing (n INTEGER)');
  const db = openPostgres(scratch.url, { max: 1 });
  const seen: string[] = [];
  function* pieces(): Generator<Buffer> {
    for (let i = 1; i <= 3; i++) {
      seen.push(`piece ${i}`);
      // Work that came in while this piece was made (a call, say): it runs before the next piece is made.
      setImmediate(() => seen.push(`other work ${i}`));
      yield Buffer.from(`${i}\n${i * 10}\n`);
    }
  }
  try {
    await db.tx((t) => t.copyIn('COPY landing (n) FROM STDIN', pieces()));
    assert.deepEqual(seen.slice(0, 5), ['piece 1', 'other work 1', 'piece 2', 'other work 2', 'piece 3']);
    const rows = await scratch.sql`SELECT n FROM landing ORDER BY n`;
    assert.deepEqual(
      rows.map((r) => r.n),
      [1, 2, 3, 10, 20, 30],
    );
  } finally {
    await db.close();
    await scratch.drop();
  }
});
