// The console's static files as the acceptor serves them (src/http/consoleFiles.ts): where they are,
// their security headers (the CSP above all), caching (ETag, 304, immutable hashed assets),
// compression, the first screen's JavaScript budget, and that /q/ and the client rate limit are as
// they were. The console in a browser is test/integration/consoleBrowser.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import { CONSOLE_DIR } from '../../src/http/consoleFiles.js';
import { startTestServer, type TestServer } from '../helpers.js';

let s: TestServer;
before(async () => {
  s = await startTestServer({ QUERYAPIGATE_RATE_LIMIT: '3/minute' });
});
after(() => s.stop());

const get = (path: string, headers: Record<string, string> = {}) => fetch(s.url + path, { headers, redirect: 'manual' });

/** The body's bytes as they came: fetch would decompress them. */
function rawGet(path: string, headers: Record<string, string>): Promise<{ headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    http
      .get(s.url + path, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}

const directives = (csp: string) =>
  new Map(
    csp
      .split(';')
      .map((d) => d.trim().split(/\s+/) as [string, ...string[]])
      .map(([k, ...v]) => [k, v]),
  );

test('/ sends a browser to /console/', async () => {
  const res = await get('/');
  assert.equal(res.status, 302);
  assert.equal(res.headers.get('location'), '/console/');
});

test('the page is served with a CSP that allows no inline script, no eval and no framing', async () => {
  for (const path of ['/console', '/console/', '/console/index.html']) {
    const res = await get(path);
    assert.equal(res.status, 200, path);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    const csp = directives(res.headers.get('content-security-policy') ?? '');
    assert.deepEqual(csp.get('default-src'), ["'self'"]);
    assert.deepEqual(csp.get('script-src'), ["'self'"], 'scripts only from this server: no inline, no eval');
    assert.deepEqual(csp.get('style-src-elem'), ["'self'"], 'no inline <style>');
    assert.deepEqual(csp.get('frame-ancestors'), ["'none'"]);
    assert.deepEqual(csp.get('connect-src'), ["'self'"], 'nothing fetched from outside');
    assert.ok(![...csp.values()].flat().includes("'unsafe-eval'"));
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(res.headers.get('cache-control'), 'no-cache', 'the page is revalidated: it names the current assets');
  }
});

test('the page holds no inline script and names only this server', async () => {
  const html = readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8');
  const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
  assert.ok(scripts.length > 0);
  for (const [, attrs, body] of scripts) {
    assert.match(attrs, /src="\/console\/assets\//);
    assert.equal(body.trim(), '', 'no inline script');
  }
  assert.doesNotMatch(html, /https?:\/\//, 'nothing from another origin');
});

test('an unchanged page answers 304 to its ETag, and any other /console path is the app', async () => {
  const first = await get('/console/');
  const etag = first.headers.get('etag');
  assert.match(etag ?? '', /^"[\w-]+"$/);
  const again = await get('/console/', { 'If-None-Match': etag! });
  assert.equal(again.status, 304);
  assert.equal(await again.text(), '');
  assert.equal((await get('/console/', { 'If-None-Match': '"other"' })).status, 200);
  const route = await get('/console/keys');
  assert.equal(route.status, 200);
  assert.equal(route.headers.get('etag'), etag, 'an app route answers index.html');
  assert.equal((await get('/console/assets/missing-0000.js')).status, 404, 'a missing asset is not the page');
});

test('hashed assets are immutable and compressed with brotli or gzip as asked', async () => {
  const html = await (await get('/console/')).text();
  const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]);
  assert.ok(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css')), assets.join());
  for (const path of assets) {
    const plain = await get(path, { 'Accept-Encoding': 'identity' });
    assert.equal(plain.status, 200);
    assert.equal(plain.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    assert.equal(plain.headers.get('content-encoding'), null);
    assert.equal(plain.headers.get('vary'), 'Accept-Encoding');
    const bytes = Buffer.from(await plain.arrayBuffer());
    const br = await rawGet(path, { 'Accept-Encoding': 'gzip, deflate, br' });
    assert.equal(br.headers['content-encoding'], 'br');
    assert.equal(br.headers.etag, plain.headers.get('etag'));
    assert.ok(br.body.length < bytes.length);
    assert.deepEqual(brotliDecompressSync(br.body), bytes);
    const gz = await rawGet(path, { 'Accept-Encoding': 'gzip, br;q=0' });
    assert.equal(gz.headers['content-encoding'], 'gzip', 'br;q=0 refuses brotli');
    assert.deepEqual(gunzipSync(gz.body), bytes);
    if (path.endsWith('.js')) assert.match(plain.headers.get('content-type') ?? '', /^text\/javascript/);
  }
});

test('the first screen loads under 300 KB of JavaScript gzipped', async () => {
  const html = readFileSync(join(CONSOLE_DIR, 'index.html'), 'utf8');
  const scripts = [...html.matchAll(/<(?:script|link rel="modulepreload")[^>]*(?:src|href)="\/console\/([^"]+\.js)"/g)].map((m) => m[1]);
  assert.ok(scripts.length > 0);
  const gz = scripts.reduce((n, f) => n + gzipSync(readFileSync(join(CONSOLE_DIR, f))).byteLength, 0);
  console.log(`first screen: ${scripts.join(', ')}: ${(gz / 1024).toFixed(1)} KB gzipped`);
  assert.ok(gz < 300 * 1024, `${gz} bytes`);
});

test('console files are never rate-limited, and /q/ answers as before', async () => {
  for (let i = 0; i < 6; i++) assert.equal((await get('/console/')).status, 200, `request ${i + 1}`);
  const call = await s.call('GET', '/q/nothing_here');
  assert.match(call.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(call.json.code, 'query_not_found');
  assert.equal(call.headers.get('content-security-policy'), null, '/q/ answers carry none of the console headers');
});
