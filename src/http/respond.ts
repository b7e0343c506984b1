// In charge of uWS discipline, in one place: requests are copied off the stack at once, onAborted
// is attached before any await, bodies are read with a size limit, and every answer is written
// corked, status first, only while the response is still alive. Route handlers never touch res.
import { randomUUID } from 'node:crypto';
import type { HttpRequest as UwsRequest, HttpResponse } from 'uWebSockets.js';
import { errorBody } from '../call/errors.js';

/** A request as plain data, read synchronously from uWS. */
export interface Request {
  method: string;
  url: string;
  query: string;
  requestId: string;
  apiKey: string;
  contentType: string;
  ifNoneMatch: string;
  ip: string;
  body: Uint8Array | null;
  receivedAt: number;
  /** performance.now() when the request arrived, for the duration metric. */
  started: number;
}

/** An answer ready to write: headers are a flat [name, value, ...] list. */
export interface Answer {
  status: number;
  headers: string[];
  body: string;
  /** The caller's name, for the request metrics. */
  key?: string;
}

export type Handler = (req: Request) => Answer | Promise<Answer>;

export interface ServeOptions {
  maxBody: number;
  /** Told of every answer written (for the request metrics); not called for aborted requests. */
  onAnswer?: (req: Request, a: Answer) => void;
  /** Trusted X-Forwarded-For hops (QUERYAPIGATE_TRUST_PROXY). */
  trustProxy: number;
}

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK', 201: '201 Created', 204: '204 No Content', 304: '304 Not Modified', 400: '400 Bad Request',
  401: '401 Unauthorized', 403: '403 Forbidden', 404: '404 Not Found', 405: '405 Method Not Allowed', 409: '409 Conflict',
  412: '412 Precondition Failed', 413: '413 Payload Too Large', 415: '415 Unsupported Media Type', 429: '429 Too Many Requests',
  500: '500 Internal Server Error', 502: '502 Bad Gateway', 503: '503 Service Unavailable', 504: '504 Gateway Timeout',
};
const statusLine = (s: number) => STATUS_TEXT[s] ?? `${s} Status`;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;
const decoder = new TextDecoder();

/** The caller's X-Request-Id when valid, else 12 fresh hex characters. */
export function requestIdFrom(header: string): string {
  if (header && REQUEST_ID.test(header)) return header;
  const u = randomUUID();
  return u.slice(0, 8) + u.slice(9, 13);
}

const JSON_HEADERS = ['Content-Type', 'application/json'];

export function jsonAnswer(status: number, value: unknown, extraHeaders?: string[]): Answer {
  return { status, headers: extraHeaders ? JSON_HEADERS.concat(extraHeaders) : JSON_HEADERS, body: status === 204 ? '' : JSON.stringify(value) };
}

export function errorAnswer(status: number, code: Parameters<typeof errorBody>[0], message: string, requestId: string,
  extras?: Parameters<typeof errorBody>[3]): Answer {
  return { status, headers: JSON_HEADERS, body: errorBody(code, message, requestId, extras) };
}

/**
 * Serves one request: reads it, reads its body when the method carries one (at most maxBody
 * bytes, else 413), runs the handler, writes its answer. One idempotent finish for done and aborted.
 */
export function serve(res: HttpResponse, uwsReq: UwsRequest, handler: Handler, opts: ServeOptions): void {
  const maxBody = opts.maxBody;
  const method = uwsReq.getMethod().toUpperCase();
  const req: Request = {
    method,
    url: uwsReq.getUrl(),
    query: uwsReq.getQuery() ?? '',
    requestId: requestIdFrom(uwsReq.getHeader('x-request-id')),
    apiKey: uwsReq.getHeader('x-api-key'),
    contentType: uwsReq.getHeader('content-type'),
    ifNoneMatch: uwsReq.getHeader('if-none-match'),
    ip: clientAddress(res, opts.trustProxy ? uwsReq.getHeader('x-forwarded-for') : '', opts.trustProxy),
    body: null,
    receivedAt: Date.now(),
    started: performance.now(),
  };
  const declared = uwsReq.getHeader('content-length');
  let done = false;
  res.onAborted(() => {
    done = true;
  });
  const finish = (a: Answer) => {
    if (done) return;
    done = true;
    opts.onAnswer?.(req, a);
    res.cork(() => {
      res.writeStatus(statusLine(a.status));
      const h = a.headers;
      for (let i = 0; i < h.length; i += 2) res.writeHeader(h[i], h[i + 1]);
      res.writeHeader('X-Request-Id', req.requestId);
      if (a.status === 204 || a.status === 304) res.endWithoutBody(0);
      else res.end(a.body);
    });
  };
  const run = () => {
    let out: Answer | Promise<Answer>;
    try {
      out = handler(req);
    } catch (e) {
      return finish(internalError(req, e));
    }
    if (out instanceof Promise) out.then(finish, (e) => finish(internalError(req, e)));
    else finish(out);
  };
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || declared === '0') return run();
  if (declared && Number(declared) > maxBody) {
    return finish(errorAnswer(413, 'payload_too_large', `Request body is larger than ${maxBody} bytes`, req.requestId));
  }
  readBody(res, maxBody, (body) => {
    if (body === null) {
      finish(errorAnswer(413, 'payload_too_large', `Request body is larger than ${maxBody} bytes`, req.requestId));
      return;
    }
    req.body = body;
    run();
  });
}

/**
 * The client's address: the socket's peer, or with N trusted proxy hops the Nth X-Forwarded-For
 * entry from the right (each trusted proxy appends the address it saw). An IPv4-mapped IPv6
 * address is given in its IPv4 form.
 */
function clientAddress(res: HttpResponse, forwardedFor: string, hops: number): string {
  return forwardedClient(decoder.decode(res.getRemoteAddressAsText()), forwardedFor, hops);
}

export function forwardedClient(peer: string, forwardedFor: string, hops: number): string {
  let text = peer;
  if (hops > 0 && forwardedFor) {
    const parts = forwardedFor.split(',');
    if (parts.length >= hops) text = parts[parts.length - hops].trim();
  }
  return text.startsWith('::ffff:') && text.includes('.') ? text.slice(7) : text;
}

function internalError(req: Request, e: unknown): Answer {
  console.error(`[${req.requestId}] internal error on ${req.method} ${req.url}:`, e);
  return errorAnswer(500, 'internal_error', 'An error occurred', req.requestId);
}

/** Collects the body; chunks are copied because uWS neuters them when the callback returns. */
function readBody(res: HttpResponse, maxBody: number, done: (body: Uint8Array | null) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  res.onData((chunk, isLast) => {
    if (over) return;
    size += chunk.byteLength;
    if (size > maxBody) {
      over = true;
      done(null);
      return;
    }
    chunks.push(Buffer.from(chunk.slice(0)));
    if (isLast) done(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
  });
}
