// The server's threads load only what every call needs: libraries for one format, one command or
// one setting (the MCP SDK and zod, yaml, hyparquet-writer, jose, exceljs, mysql2, ioredis, piscina) load on
// first use. Each was a few MB of every thread's heap, and the old generation grows with the live heap.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const dist = fileURLToPath(new URL('../../', import.meta.url));
const LAZY = ['@modelcontextprotocol/sdk', 'zod', 'yaml', 'hyparquet-writer', 'jose', 'exceljs', 'mysql2', 'ioredis', 'piscina'];

test('the modules every server thread loads leave out the libraries of one format, command or setting', () => {
  const file = join(mkdtempSync(join(tmpdir(), 'qag-modules-')), 'resolved');
  // What main.js, the acceptor, an executor and the recorder import before any call.
  const script = `
    import { register } from 'node:module';
    import { createRequire } from 'node:module';
    register(${JSON.stringify(new URL('test/moduleHooks.js', `file://${dist}`).href)}, { data: { file: ${JSON.stringify(file)} } });
    for (const m of ['src/cli/run.js', 'src/serve.js', 'src/call/context.js', 'src/call/runCall.js', 'src/call/adhoc.js',
      'src/call/answerBatches.js', 'src/catalog/build.js', 'src/recorder/recorder.js']) await import(${JSON.stringify(dist)} + m);
    console.log(JSON.stringify(Object.keys(createRequire(import.meta.url).cache)));`;
  const required = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })) as string[];
  const loaded = [...readFileSync(file, 'utf8').split('\n'), ...required];
  assert.ok(
    loaded.some((m) => m.includes('/node_modules/postgres/')),
    'the hook saw the server load its PostgreSQL driver',
  );
  for (const name of LAZY) {
    const found = loaded.filter((m) => m.includes(`/node_modules/${name}/`));
    assert.deepEqual(found, [], `${name} is loaded with the server`);
  }
});
