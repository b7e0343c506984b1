// In charge of the first stage of a call: turning a Request into a CallRequest, the caller's intent
// (query name, query string, JSON body, format, version, timeout, paging), checked for shape only.
// Nothing is looked up here.
import { GatewayError } from '../contract/errors.js';
import type { Request } from '../contract/exchange.js';
import { FORMATS, type Format } from './formats.js';

/** Query-string names that are request options, never parameters. */
export const RESERVED = new Set(['format', 'page', 'page_size', 'connection_name', 'version', 'timeout', 'stream']);

export interface CallRequest {
  name: string;
  version: number | null;
  connectionName: string | null;
  format: Format;
  page: string | null;
  pageSize: string | null;
  /** Seconds asked for by the caller, or null for the server's limit. */
  timeout: number | null;
  /** Parameter values by name: strings from the query string, JSON values from a POST body's params. */
  params: ReadonlyMap<string, unknown>;
  /** True when params came from a JSON body, so values must already have their types. */
  typed: boolean;
  /** ?stream=true: the whole result as an export, from a database cursor. */
  stream: boolean;
}

export const STREAM_FORMATS: readonly Format[] = ['csv', 'tsv', 'ndjson', 'parquet', 'xlsx'];

const decoder = new TextDecoder();

/**
 * The query string's names and values, decoded, the first value of a name winning. A Map, not an
 * object: any name is a plain entry (`__proto__`, `constructor`), and on the hot path a small Map is
 * several times cheaper to fill and read than a null-prototype object (dictionary mode).
 */
export function parseQueryString(qs: string): Map<string, string> {
  const out = new Map<string, string>();
  if (!qs) return out;
  let start = 0;
  while (start <= qs.length) {
    let end = qs.indexOf('&', start);
    if (end === -1) end = qs.length;
    if (end > start) {
      const eq = qs.indexOf('=', start);
      const hasValue = eq !== -1 && eq < end;
      const k = decode(qs.slice(start, hasValue ? eq : end));
      if (!out.has(k)) out.set(k, hasValue ? decode(qs.slice(eq + 1, end)) : ''); // first value wins
    }
    start = end + 1;
  }
  return out;
}

function decode(s: string): string {
  if (s.indexOf('%') === -1 && s.indexOf('+') === -1) return s;
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch {
    throw new GatewayError('invalid_request', 'The query string is not valid URL encoding');
  }
}

/** A body that must be one JSON object, or null when empty; every entry point reads bodies with it. */
export function parseJsonObject(bytes: Uint8Array | null): Record<string, unknown> | null {
  if (!bytes || bytes.length === 0) return null;
  const text = decoder.decode(bytes);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new GatewayError('invalid_body', 'Request body is not valid JSON');
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new GatewayError('invalid_body', 'Request body must be a JSON object');
  }
  // JSON can escape half a surrogate pair (\uD800), which is no text: stores, hashes and canonical JSON refuse it later.
  if (SURROGATE_ESCAPE.test(text) && !wellFormed(body)) {
    throw new GatewayError('invalid_body', 'Request body holds a lone surrogate escape (\\uD800-\\uDFFF), which is not valid Unicode text');
  }
  return body as Record<string, unknown>;
}

/** Only an escape can put a surrogate in a JSON text: the decoder turns raw ones into U+FFFD. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** Whether every string of a parsed JSON value, keys included, is well-formed Unicode. */
function wellFormed(value: unknown): boolean {
  if (typeof value === 'string') return (value as unknown as { isWellFormed(): boolean }).isWellFormed();
  if (value === null || typeof value !== 'object') return true;
  for (const [key, item] of Object.entries(value)) if (!wellFormed(key) || !wellFormed(item)) return false;
  return true;
}

/** The query's name from a /q/<name> path; a name that is not valid URL encoding is taken as sent. */
function queryName(url: string): string {
  const raw = url.slice(3);
  if (raw.indexOf('%') === -1) return raw; // nothing to decode: most names
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

export function parseCall(req: Request): CallRequest {
  const args = parseQueryString(req.query);
  const body = req.method === 'POST' ? parseJsonObject(req.body) : null;
  const pick = body ? (k: string): unknown => args.get(k) ?? body[k] : (k: string): unknown => args.get(k);
  const options = callOptions(pick);

  let version: number | null = null;
  const versionRaw = scalar(pick('version'));
  if (versionRaw !== undefined && versionRaw !== '') {
    version = Number(versionRaw);
    if (!Number.isSafeInteger(version) || version < 1 || (typeof versionRaw === 'string' && !/^\d+$/.test(versionRaw))) {
      throw new GatewayError('invalid_request', 'version must be a positive integer');
    }
  }
  const connectionName = scalar(pick('connection_name'));
  // The query string's names less the options are the parameters (the Map itself: nothing else reads it).
  const params: Map<string, unknown> = args;
  for (const k of RESERVED) params.delete(k);
  let typed = false;
  if (body && body.params !== undefined) {
    if (body.params === null || typeof body.params !== 'object' || Array.isArray(body.params)) {
      throw new GatewayError('invalid_body', 'params must be a JSON object');
    }
    for (const [k, v] of Object.entries(body.params)) params.set(k, v);
    typed = true;
  }
  options.name = queryName(req.url);
  options.version = version;
  options.connectionName = connectionName === undefined || connectionName === '' ? null : String(connectionName);
  options.params = params;
  options.typed = typed;
  return options;
}

/**
 * The options every statement call takes (format, timeout, paging, stream), each from the query string
 * or the body, in a CallRequest whose other fields the caller fills (one object a call, not a copy).
 */
export function callOptions(pick: (k: string) => unknown): CallRequest {
  const formatRaw = scalar(pick('format'));
  const format = (formatRaw === undefined || formatRaw === '' ? 'json' : String(formatRaw).toLowerCase()) as Format;
  if (!FORMATS.includes(format)) {
    throw new GatewayError('invalid_format', `Unsupported format '${String(formatRaw)}'. Supported formats: ${FORMATS.join(', ')}`);
  }

  let timeout: number | null = null;
  const timeoutRaw = scalar(pick('timeout'));
  if (timeoutRaw !== undefined && timeoutRaw !== '') {
    timeout = typeof timeoutRaw === 'number' ? timeoutRaw : /^\s*\d*\.?\d+\s*$/.test(String(timeoutRaw)) ? Number(timeoutRaw) : NaN;
    if (Number.isNaN(timeout)) throw new GatewayError('invalid_timeout', 'timeout must be a number of seconds');
    if (!(timeout > 0) || !Number.isFinite(timeout)) throw new GatewayError('invalid_timeout', 'timeout must be a positive number of seconds');
  }

  const streamRaw = scalar(pick('stream'));
  const stream =
    streamRaw !== undefined && ['1', 'true', 'yes', 'on', true].includes(typeof streamRaw === 'string' ? streamRaw.toLowerCase() : (streamRaw as boolean));

  const page = scalar(pick('page'));
  const pageSize = scalar(pick('page_size'));
  return {
    name: '',
    version: null,
    connectionName: null,
    format,
    page: page === undefined ? null : String(page),
    pageSize: pageSize === undefined ? null : String(pageSize),
    timeout,
    params: NO_PARAMS,
    typed: false,
    stream,
  };
}

const NO_PARAMS: ReadonlyMap<string, unknown> = new Map();

/**
 * An option read as a scalar: a body's object or array as its JSON text. String() or Number() of a parsed object calls
 * its own toString or valueOf, which the body may set (`{"page": {"toString": null}}` threw a TypeError: a 500).
 */
function scalar(v: unknown): unknown {
  return v !== null && typeof v === 'object' ? JSON.stringify(v) : v;
}

export interface Paging {
  page: number;
  pageSize: number;
}

/** page (default 1) and page_size (default 10, at most maxPageSize); checked after parameters. */
export function parsePaging(req: CallRequest, maxPageSize: number): Paging {
  const page = req.page === null || req.page === '' ? 1 : wholeNumber(req.page, 'page');
  const pageSize = req.pageSize === null || req.pageSize === '' ? Math.min(10, maxPageSize) : wholeNumber(req.pageSize, 'page_size');
  if (page < 1 || pageSize < 1) throw new GatewayError('invalid_paging', 'page and page_size must be positive');
  if (pageSize > maxPageSize) throw new GatewayError('invalid_paging', `page_size must not exceed ${maxPageSize}`);
  if ((page - 1) * pageSize > Number.MAX_SAFE_INTEGER) throw new GatewayError('invalid_paging', 'page is too large');
  return { page, pageSize };
}

function wholeNumber(s: string, name: string): number {
  if (!/^-?\d{1,15}$/.test(s)) throw new GatewayError('invalid_paging', `${name} must be an integer`);
  return Number(s);
}
