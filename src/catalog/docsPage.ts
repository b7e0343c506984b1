// In charge of /docs: a page that asks for the API key (kept in sessionStorage, never in a URL),
// fetches /openapi.json with it and renders it with Swagger UI, every file served from this server.
//
// Why Swagger UI (swagger-ui-dist, its prebuilt bundle): it is what the reference serves at /docs,
// it is one dependency-free bundle of static files (no build step, nothing fetched from outside once
// `validatorUrl` is off), and it gives every operation a "Try it out" form. The page and its script
// are our own, so the script is a file (no inline script) and the CSP below allows nothing foreign.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Answer } from '../contract/exchange.js';

/**
 * Only this server's own files; inline styles, which Swagger UI sets on elements, and data: images,
 * which its stylesheet holds. No form may be submitted anywhere (the key form is handled by script).
 */
export const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>QueryAPIGate: saved queries</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="stylesheet" href="/docs/docs.css">
</head>
<body>
<header class="qag-key">
  <form id="qag-key-form" autocomplete="off">
    <label for="qag-key">API key</label>
    <input id="qag-key" type="password" autocomplete="new-password" spellcheck="false" placeholder="X-API-Key">
    <button type="submit">Show my queries</button>
    <button type="button" id="qag-forget">Forget the key</button>
    <span id="qag-status" role="status"></span>
  </form>
</header>
<div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/docs.js"></script>
</body>
</html>
`;

const STYLE = `.qag-key { font-family: sans-serif; padding: 12px 20px; background: #1b1b1b; color: #fff; }
.qag-key form { display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
.qag-key input { min-width: 24em; padding: 4px 6px; }
#qag-status { margin-left: 8px; }
`;

// The key lives in sessionStorage (this tab only) and travels only in the X-API-Key header.
const SCRIPT = `'use strict';
(() => {
  const STORED = 'queryapigate.api_key';
  const form = document.getElementById('qag-key-form');
  const input = document.getElementById('qag-key');
  const status = document.getElementById('qag-status');
  async function show(key) {
    status.textContent = 'Loading...';
    let res;
    try {
      res = await fetch('/openapi.json', { headers: key ? { 'X-API-Key': key } : {}, cache: 'no-store', credentials: 'omit' });
    } catch {
      status.textContent = 'The server did not answer.';
      return;
    }
    if (!res.ok) {
      const body = await res.json().catch(() => ({}));
      status.textContent = res.status + ': ' + (body.error || res.statusText);
      return;
    }
    const spec = await res.json();
    const count = Object.keys(spec.paths || {}).length;
    status.textContent = count === 1 ? '1 saved query' : count + ' saved queries' + (key || count ? '' : ': enter a key to see yours');
    const ui = SwaggerUIBundle({
      spec,
      dom_id: '#ui',
      validatorUrl: null,
      deepLinking: false,
      tryItOutEnabled: true,
      requestInterceptor: (req) => {
        if (key) req.headers['X-API-Key'] = key;
        return req;
      },
    });
    if (key) ui.preauthorizeApiKey('ApiKeyAuth', key);
  }
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const key = input.value.trim();
    input.value = '';
    if (key) sessionStorage.setItem(STORED, key);
    else sessionStorage.removeItem(STORED);
    show(key);
  });
  document.getElementById('qag-forget').addEventListener('click', () => {
    sessionStorage.removeItem(STORED);
    location.reload();
  });
  show(sessionStorage.getItem(STORED) || '');
})();
`;

const SECURITY_HEADERS = ['Content-Security-Policy', DOCS_CSP, 'X-Content-Type-Options', 'nosniff', 'Referrer-Policy', 'no-referrer'];

/** The page, its script and style, and Swagger UI's two files: a fixed set, read once on first use. */
export class DocsFiles {
  #files: Map<string, Answer> | null = null;

  /** The answer for /docs or /docs/<file>, or null for a file that is not one of them. */
  get(path: string): Answer | null {
    this.#files ??= load();
    const file = this.#files.get(path);
    return file ? { ...file, headers: [...file.headers] } : null;
  }
}

function load(): Map<string, Answer> {
  const dist = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const file = (type: string, body: string, cache: string): Answer => ({
    status: 200,
    headers: ['Content-Type', type, 'Cache-Control', cache, ...SECURITY_HEADERS],
    body,
  });
  // The page is small and names no version; the bundle changes only with the package.
  const fresh = 'no-cache';
  const day = 'public, max-age=86400';
  const page = file('text/html; charset=utf-8', PAGE, fresh);
  return new Map([
    ['/docs', page],
    ['/docs/', page],
    ['/docs/docs.js', file('text/javascript; charset=utf-8', SCRIPT, fresh)],
    ['/docs/docs.css', file('text/css; charset=utf-8', STYLE, fresh)],
    ['/docs/swagger-ui.css', file('text/css; charset=utf-8', readFileSync(join(dist, 'swagger-ui.css'), 'utf8'), day)],
    ['/docs/swagger-ui-bundle.js', file('text/javascript; charset=utf-8', readFileSync(join(dist, 'swagger-ui-bundle.js'), 'utf8'), day)],
  ]);
}
