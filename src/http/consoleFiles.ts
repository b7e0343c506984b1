// In charge of the console's static files (/console, built by `npm run build` into dist/console):
// each file read, hashed (ETag) and compressed (gzip and brotli, when that makes it smaller) once, at
// first use, and answered from memory with the console's security headers. A fixed, bounded set: the
// files of one build, so nothing is compressed per request and nothing grows.
//
// Files under /console/assets/ carry a content hash in their name (Vite's), so they are cached for a
// year as immutable; index.html names them and is revalidated on every load (no-cache + ETag). Any
// other /console path that is not a file is the app's own route and answers index.html.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';
import type { Answer } from '../contract/exchange.js';

/**
 * Scripts and style sheets only from this server: no inline script and no eval. Style attributes
 * are allowed (style-src-attr), since CodeMirror sets some on its elements (tab size, the gutter's
 * height); they cannot run code, and no <style> element is (style-src-elem is 'self' only).
 * data: images for icons, requests only to this server; never framed, no form posts anywhere.
 */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; style-src-elem 'self'; style-src-attr 'unsafe-inline'; " +
  "img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const SECURITY_HEADERS = [
  'Content-Security-Policy',
  CONSOLE_CSP,
  'X-Frame-Options',
  'DENY',
  'X-Content-Type-Options',
  'nosniff',
  'Referrer-Policy',
  'no-referrer',
  'Vary',
  'Accept-Encoding',
];

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};
/** Types worth compressing (the others are compressed already). */
const TEXTUAL = new Set(['.html', '.js', '.css', '.svg', '.json', '.txt']);
/** Below this, compression saves less than its headers cost. */
const MIN_COMPRESS = 512;
/** What one build may hold in memory (all variants); a larger build is refused at load, not served half. */
const MAX_TOTAL_BYTES = 64 << 20;

interface StaticFile {
  type: string;
  cache: string;
  etag: string;
  plain: Uint8Array;
  gzip: Uint8Array | null;
  br: Uint8Array | null;
}

/** Where `npm run build` puts the console: dist/console, beside dist/src. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../console', import.meta.url));

export class ConsoleFiles {
  #files: Map<string, StaticFile> | null = null;

  constructor(readonly dir: string = CONSOLE_DIR) {}

  /** Whether there is a build to serve. */
  get built(): boolean {
    this.#files ??= loadFiles(this.dir);
    return this.#files.size > 0;
  }

  /** The answer for a GET of `path` (/console...), or null when the console was not built. */
  get(path: string, acceptEncoding: string, ifNoneMatch: string): Answer | null {
    this.#files ??= loadFiles(this.dir);
    const file = this.#files.get(path) ?? (path.startsWith('/console/assets/') ? undefined : this.#files.get('/console/index.html'));
    if (!file) return null;
    const headers = ['Content-Type', file.type, 'Cache-Control', file.cache, 'ETag', file.etag, ...SECURITY_HEADERS];
    if (ifNoneMatch && matches(ifNoneMatch, file.etag)) return { status: 304, headers, body: '' };
    const [encoding, body] = pick(file, acceptEncoding);
    if (encoding) headers.push('Content-Encoding', encoding);
    return { status: 200, headers, body };
  }
}

/** br, then gzip, when the client takes it (q=0 refuses it) and the file has it. */
function pick(f: StaticFile, accept: string): [string | null, Uint8Array] {
  if (f.br && accepts(accept, 'br')) return ['br', f.br];
  if (f.gzip && accepts(accept, 'gzip')) return ['gzip', f.gzip];
  return [null, f.plain];
}

/** Whether Accept-Encoding names the coding with a q above 0 (or none). */
function accepts(header: string, coding: string): boolean {
  for (const part of header.split(',')) {
    const [token, ...params] = part.split(';').map((s) => s.trim());
    if (token.toLowerCase() !== coding) continue;
    const q = params.find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  }
  return false;
}

/** If-None-Match: `*`, or a list of tags one of which is ours (weak or strong). */
function matches(header: string, etag: string): boolean {
  if (header.trim() === '*') return true;
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

function loadFiles(dir: string): Map<string, StaticFile> {
  const out = new Map<string, StaticFile>();
  if (!existsSync(join(dir, 'index.html'))) return out;
  let total = 0;
  for (const path of walk(dir)) {
    const ext = extname(path);
    const plain = readFileSync(path);
    const url = `/console/${relative(dir, path).split(sep).join('/')}`;
    const hashed = url.startsWith('/console/assets/');
    const small = plain.byteLength < MIN_COMPRESS || !TEXTUAL.has(ext);
    const gzip = small ? null : smaller(gzipSync(plain, { level: 9 }), plain);
    const br = small ? null : smaller(brotliCompressSync(plain, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11 } }), plain);
    total += plain.byteLength + (gzip?.byteLength ?? 0) + (br?.byteLength ?? 0);
    if (total > MAX_TOTAL_BYTES) throw new Error(`the console build in ${dir} is larger than ${MAX_TOTAL_BYTES} bytes`);
    out.set(url, {
      type: TYPES[ext] ?? 'application/octet-stream',
      cache: hashed ? 'public, max-age=31536000, immutable' : 'no-cache',
      etag: `"${createHash('sha256').update(plain).digest('base64url').slice(0, 27)}"`,
      plain,
      gzip,
      br,
    });
  }
  return out;
}

const smaller = (packed: Uint8Array, plain: Uint8Array) => (packed.byteLength < plain.byteLength ? packed : null);

function* walk(dir: string): Generator<string> {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) yield* walk(path);
    else yield path;
  }
}
