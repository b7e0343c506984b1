// In charge of uWS discipline, in one place: requests are copied off the stack at once, onAborted
// is attached before any await, bodies are read with a size limit, and every answer is written
// corked, status first, only while the response is still alive. Route handlers never touch res.
import { randomFillSync } from 'node:crypto';
import type { HttpRequest as UwsRequest, HttpResponse } from 'uWebSockets.js';
import { type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import { logger } from '../log.js';
import type { Cors } from './cors.js';

export type Handler = (req: Request) => Answer | StreamStart | Promise<Answer | StreamStart>;

/** An answer whose body is written over time (server-sent events, streamed exports). */
export interface StreamStart {
  status: number;
  headers: string[];
  key?: string;
  /** Called once the status and headers are out; writes go through `out`. */
  start(out: StreamOut): void;
}

/** The write side of a streamed answer, with backpressure and one close notification. */
export interface StreamOut {
  /** Writes a chunk; false when the socket's buffer is backed up (wait for onDrain) or closed. */
  write(chunk: string | Uint8Array): boolean;
  /** Bytes waiting in the socket's buffer. */
  buffered(): number;
  /** Calls fn once when the socket can take more. */
  onDrain(fn: () => void): void;
  /** Ends the answer normally. */
  end(): void;
  /** Drops the connection (a reader too slow to keep). */
  abort(): void;
  readonly closed: boolean;
  /**
   * Called once when the answer ends, is aborted, or the client goes away; `stalled`: cut because the reader took nothing
   * for QUERYAPIGATE_STALL_TIMEOUT.
   */
  onClose(fn: (stalled: boolean) => void): void;
}

export interface ServeOptions {
  maxBody: number;
  /** Told of every answer written (for the request metrics); not called for aborted requests. */
  onAnswer?: (req: Request, a: Answer) => void;
  /** Trusted X-Forwarded-For hops (QUERYAPIGATE_TRUST_PROXY). */
  trustProxy: number;
  /** How long an answer the socket could not take at once waits while its reader takes nothing (QUERYAPIGATE_STALL_TIMEOUT); 0 = forever. */
  stallMs: number;
  /** More request headers the route's handler reads (lower-case names), copied into `Request.headers`. */
  headers?: readonly string[];
  /** Reads the Authorization header into `Request.authorization` (JWT on). */
  authorization?: boolean;
  /** Browser callers' origins (CORS on): every answer to an allowed origin carries the CORS headers. */
  cors?: Cors | null;
}

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  201: '201 Created',
  202: '202 Accepted',
  204: '204 No Content',
  302: '302 Found',
  304: '304 Not Modified',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  403: '403 Forbidden',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  406: '406 Not Acceptable',
  409: '409 Conflict',
  412: '412 Precondition Failed',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  429: '429 Too Many Requests',
  500: '500 Internal Server Error',
  502: '502 Bad Gateway',
  503: '503 Service Unavailable',
  504: '504 Gateway Timeout',
};
const statusLine = (s: number) => STATUS_TEXT[s] ?? `${s} Status`;

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;
const decoder = new TextDecoder();

/**
 * Random bytes for request ids, drawn 6 at a time from a pool filled 4 KiB at once: one
 * randomUUID per request (a crypto call, a 36-character string and two slices) cost more than
 * the id is worth on the hot path.
 */
const ID_BYTES = 6;
const idPool = Buffer.alloc(4096 - (4096 % ID_BYTES));
let idAt = idPool.length;

/** The caller's X-Request-Id when valid, else 12 fresh hex characters. */
export function requestIdFrom(header: string): string {
  if (header && REQUEST_ID.test(header)) return header;
  if (idAt === idPool.length) {
    randomFillSync(idPool);
    idAt = 0;
  }
  idAt += ID_BYTES;
  return idPool.toString('hex', idAt - ID_BYTES, idAt);
}

/**
 * A request copied off uWS's stack. The client's address costs a system call (getpeername) and a
 * decode, so it is read on first use, only by the rules that look at it (allowed_ips, the
 * per-address limit), and only while the answer is not written (the socket's state is uWS's).
 *
 * A class, so each request is a fast object: an object literal with its own `ip` getter was a
 * dictionary-mode object (1,062 bytes and ~650 ns to make against 106 bytes and ~45 ns without the
 * getter, and every field read on the call's path a hash lookup). The getter is the prototype's,
 * so a copy (a spread, a structured clone to an executor) must take `ip` itself: `plainRequest`.
 */
class SocketRequest implements Request {
  method: string;
  url: string;
  query: string;
  requestId: string;
  apiKey: string;
  authorization: string | undefined = undefined;
  ifNoneMatch: string;
  lastEventId: string;
  body: Uint8Array | null = null;
  started: number;
  headers: Record<string, string> | undefined = undefined;
  #res: HttpResponse;
  /** X-Forwarded-For, copied now: uWS's request lives only until serve returns. */
  #forwardedFor: string;
  #hops: number;
  #ip: string | null = null;
  #settled = false;

  constructor(res: HttpResponse, uwsReq: UwsRequest, method: string, opts: ServeOptions) {
    this.method = method;
    this.url = uwsReq.getUrl();
    this.query = uwsReq.getQuery() ?? '';
    this.requestId = requestIdFrom(uwsReq.getHeader('x-request-id'));
    this.apiKey = uwsReq.getHeader('x-api-key');
    this.ifNoneMatch = uwsReq.getHeader('if-none-match');
    this.lastEventId = uwsReq.getHeader('last-event-id');
    this.started = performance.now();
    if (opts.headers) this.headers = Object.fromEntries(opts.headers.map((h) => [h, uwsReq.getHeader(h)]));
    if (opts.authorization) this.authorization = uwsReq.getHeader('authorization');
    this.#res = res;
    this.#hops = opts.trustProxy;
    this.#forwardedFor = opts.trustProxy ? forwardedFor(uwsReq) : '';
  }

  get ip(): string {
    this.#ip ??= this.#settled ? '' : clientAddress(this.#res, this.#forwardedFor, this.#hops);
    return this.#ip;
  }

  /** Answered or aborted: the socket is not ours to read any more (a later `ip` is what was read, or ''). */
  get settled(): boolean {
    return this.#settled;
  }

  settle(): void {
    this.#settled = true;
  }
}

/**
 * The request as plain data, its address read: what crosses to an executor, or is copied with more
 * fields. `changes` (Request.changes) is written into the copy as it is made rather than added to it
 * after, which would change the copy's shape on every call.
 */
export function plainRequest(req: Request, changes?: number): Request {
  return { ...req, ip: req.ip, changes };
}

/**
 * Serves one request: reads it, reads its body when the method carries one (at most maxBody
 * bytes, else 413), runs the handler, writes its answer. One idempotent finish for done and aborted.
 */
export function serve(res: HttpResponse, uwsReq: UwsRequest, handler: Handler, opts: ServeOptions): void {
  const maxBody = opts.maxBody;
  const method = uwsReq.getMethod().toUpperCase();
  const req = new SocketRequest(res, uwsReq, method, opts);
  const cors = opts.cors ? opts.cors.headers(uwsReq.getHeader('origin')) : null;
  const declared = uwsReq.getHeader('content-length');
  let stream: (StreamOut & { fire(stalled: boolean): void }) | null = null;
  /** A large answer's or a stream's watch for a reader that takes nothing. */
  let stall: StallWatch | null = null;
  res.onAborted(() => {
    req.settle();
    stream?.fire(false);
    stall?.disarm();
  });
  const finish = (a: Answer | StreamStart) => {
    if (req.settled) return;
    if ('start' in a) return startStream(a);
    req.settle();
    opts.onAnswer?.(req, a);
    res.cork(() => {
      res.writeStatus(statusLine(a.status));
      const h = a.headers;
      for (let i = 0; i < h.length; i += 2) res.writeHeader(h[i], h[i + 1]);
      if (cors) for (let i = 0; i < cors.length; i += 2) res.writeHeader(cors[i], cors[i + 1]);
      res.writeHeader('X-Request-Id', req.requestId);
      if (a.status === 204 || a.status === 304) res.endWithoutBody(0);
      else if (a.body.length < WATCHED_BODY) res.end(a.body);
      else stall = endWatched(res, req, a.body, opts.stallMs);
    });
  };
  const startStream = (a: StreamStart) => {
    opts.onAnswer?.(req, { status: a.status, headers: a.headers, body: '', key: a.key });
    res.cork(() => {
      res.writeStatus(statusLine(a.status));
      const h = a.headers;
      for (let i = 0; i < h.length; i += 2) res.writeHeader(h[i], h[i + 1]);
      if (cors) for (let i = 0; i < cors.length; i += 2) res.writeHeader(cors[i], cors[i + 1]);
      res.writeHeader('X-Request-Id', req.requestId);
    });
    const closers: Array<(stalled: boolean) => void> = [];
    const drains: Array<() => void> = [];
    let closed = false;
    // Bytes handed over since the socket last backed up: this build of uWS has no
    // getBufferedAmount on HTTP responses, so backpressure is tracked from write()'s answer.
    let backlog = 0;
    const watch = stallWatch(req, opts.stallMs, () => {
      stream!.fire(true); // before close: closing calls onAborted at once, which would say the client left
      res.close();
    });
    res.onWritable(() => {
      backlog = 0;
      watch.disarm();
      for (const f of drains.splice(0)) if (!closed) f();
      return true;
    });
    stream = {
      get closed() {
        return closed;
      },
      write(chunk) {
        if (closed) return false;
        let ok = false;
        res.cork(() => {
          ok = res.write(chunk);
        });
        if (!ok || backlog > 0) backlog += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.byteLength;
        if (!ok) watch.arm();
        return ok;
      },
      buffered: () => (closed ? 0 : backlog),
      onDrain(fn) {
        if (backlog === 0) fn();
        else drains.push(fn);
      },
      end() {
        if (closed) return;
        res.cork(() => res.end());
        stream!.fire(false);
      },
      abort() {
        if (closed) return;
        res.close();
        stream!.fire(false);
      },
      onClose(fn) {
        if (closed) fn(false);
        else closers.push(fn);
      },
      fire(stalled) {
        if (closed) return;
        closed = true;
        req.settle();
        watch.disarm();
        for (const f of closers.splice(0)) f(stalled);
      },
    };
    a.start(stream);
  };
  const run = () => {
    let out: Answer | StreamStart | Promise<Answer | StreamStart>;
    try {
      out = handler(req);
    } catch (e) {
      return finish(internalError(req, e));
    }
    if (out instanceof Promise) out.then(finish, (e) => finish(internalError(req, e)));
    else finish(out);
  };
  if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || declared === '0') {
    run();
    return;
  }
  if (declared && Number(declared) > maxBody) {
    finish(errorAnswer('payload_too_large', `Request body is larger than ${maxBody} bytes`, req.requestId));
    return;
  }
  readBody(res, maxBody, (body) => {
    if (body === null) {
      finish(errorAnswer('payload_too_large', `Request body is larger than ${maxBody} bytes`, req.requestId));
      return;
    }
    req.body = body;
    // uWS closes a connection on which a request arrives while an earlier one is unanswered (it
    // denies async pipelining), and it parses a whole TCP read at once. A request with a body (a
    // write, a management change) starts on the next turn, after the rest of that read: when a
    // request pipelined behind it closed the connection, it never runs, so the client's retry is
    // its only run. Reads (GET) start at once: no turn is added to the hot path.
    setImmediate(() => {
      if (!req.settled) run();
    });
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

/**
 * Every X-Forwarded-For line, in order, as the one list they make (RFC 9110, 5.3). A proxy may add a line of its own
 * rather than extend the caller's (haproxy's `option forwardfor` does): getHeader gives the first line only, the
 * caller's to write, so a caller behind deploy/scale-out/haproxy.cfg passed any allow-list, and chose its rate limit's
 * bucket, by claiming an address there.
 */
function forwardedFor(uwsReq: UwsRequest): string {
  let list = '';
  uwsReq.forEach((name, value) => {
    if (name === 'x-forwarded-for') list = list === '' ? value : `${list},${value}`;
  });
  return list;
}

/** Bodies from this size on (characters or bytes) are sent watched for a stalled reader; smaller ones fit a socket's buffer. */
const WATCHED_BODY = 64 * 1024;

/** Cuts the connection when the socket has taken nothing for `ms` since `arm` (0: never); `disarm` once it took some. */
interface StallWatch {
  arm(): void;
  disarm(): void;
}

function stallWatch(req: Request, ms: number, cut: () => void): StallWatch {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const fire = () => {
    timer = undefined;
    logger('http').warn({ request_id: req.requestId, route: req.url }, `the reader took nothing for ${ms / 1000} s: connection cut`);
    cut();
  };
  return {
    arm() {
      if (ms > 0 && timer === undefined) timer = setTimeout(fire, ms);
    },
    disarm() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}

/**
 * Ends with a large body. What the socket cannot take at once would wait in uWS for as long as the connection lasts, and
 * a reader that takes nothing would keep it (up to QUERYAPIGATE_MAX_ANSWER_BYTES) for ever: it is sent as the socket
 * drains instead, watched for a stalled reader. The watch, or null when the socket took it all.
 */
function endWatched(res: HttpResponse, req: Request, body: string | Uint8Array, stallMs: number): StallWatch | null {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const base = res.getWriteOffset();
  if (res.tryEnd(bytes, bytes.byteLength)[1]) return null;
  const watch = stallWatch(req, stallMs, () => res.close());
  watch.arm();
  res.onWritable((offset) => {
    watch.disarm();
    const [ok, done] = res.tryEnd(bytes.subarray(offset - base), bytes.byteLength);
    if (!done) watch.arm();
    return ok;
  });
  return watch;
}

function internalError(req: Request, e: unknown): Answer {
  logger('http').error({ request_id: req.requestId, key: '-', method: req.method, route: req.url, err: e }, 'internal error');
  return errorAnswer('internal_error', 'An error occurred', req.requestId);
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
