// The ground floor's request and answer: one shape each, shared by the acceptor, the executors
// (an answer crosses back as it is) and every entry point, and the error body built from the
// error table. Plain, cloneable data: no class instances, Maps or closures cross a thread.
import type { MessagePort } from 'node:worker_threads';
import { type ErrorCode, type ErrorExtras, statusOf } from './errors.js';

/** Where a request comes from, for the rules that look at the address (read `ip` only when one applies). */
export interface Remote {
  readonly ip: string;
}

/**
 * `ip` of a call that crossed to an executor without its address: reading it off the socket costs a
 * system call, and most keys have no address rule. A rule that needs it throws AddressNeeded; to any
 * other reader it is no address at all (refused, as an unknown address is).
 */
export const ADDRESS_UNREAD = 'unread';

/**
 * A request, read synchronously off the socket. It crosses to an executor as plain data: the
 * acceptor's own (http/respond.ts) keeps its `ip` getter on its prototype, so copies take `ip` itself.
 */
export interface Request {
  method: string;
  /** The path, without the query string. */
  url: string;
  /** The raw query string, without the leading '?'. */
  query: string;
  requestId: string;
  apiKey: string;
  /** The Authorization header (a signed-in user's `Bearer` token); read only with JWT on. */
  authorization?: string;
  ifNoneMatch: string;
  lastEventId: string;
  /**
   * The client's address (after QUERYAPIGATE_TRUST_PROXY hops). The acceptor reads it off the socket
   * on first use (a system call per read), so pass the request on (a Remote) and read `ip` only
   * where a rule needs it; a copy across threads reads it once.
   */
  readonly ip: string;
  /** The body (POST, PUT, PATCH), copied out of uWS. */
  body: Uint8Array | null;
  /** performance.now() in the acceptor when the request arrived, for the duration metric. */
  started: number;
  /** Headers only some routes read (MCP's Accept, Content-Type, MCP-Protocol-Version; /api/v1's If-Match), by lower-case name. */
  headers?: Record<string, string>;
  /** For /q/ with ?stream=true: the executor's end of a channel that carries the export (StreamFrame). */
  port?: MessagePort;
  /**
   * Changes the acceptor had posted to the executors when the call crossed (ChangeMessage.seq). A change
   * and a call travel on different channels, so an executor can get the call first: it then clears
   * what the change would have (CallContext.catchUp) before it reads anything.
   */
  changes?: number;
}

/** An answer ready to write: status, a flat [name, value, name, value, ...] header list, body. */
export interface Answer {
  status: number;
  headers: string[];
  /** Text, or bytes for the binary formats (xlsx, parquet): a Uint8Array crosses threads as it is. */
  body: string | Uint8Array;
  /** The caller's name for the request metrics ('admin', a key's name, '-'); absent when unknown. */
  key?: string;
  /** True when the answer went out over the request's port as a stream. */
  streamed?: boolean;
  /** Never written: the call crossed without its address and a rule needs it, so it is sent again with it. */
  addressNeeded?: true;
}

const JSON_HEADERS = ['Content-Type', 'application/json'];
const utf8 = new TextDecoder();

/** The body as text (a binary body decoded as UTF-8), for readers of JSON answers. */
export function bodyText(a: Answer): string {
  return typeof a.body === 'string' ? a.body : utf8.decode(a.body);
}

export function jsonAnswer(status: number, value: unknown, extraHeaders?: string[]): Answer {
  return { status, headers: extraHeaders ? JSON_HEADERS.concat(extraHeaders) : JSON_HEADERS, body: status === 204 ? '' : JSON.stringify(value) };
}

/** The error body: {"error", "code", ...extras, "request_id"}. */
export function errorBody(code: ErrorCode, message: string, requestId: string, extras?: ErrorExtras): string {
  const body: Record<string, unknown> = { error: message, code };
  if (extras) Object.assign(body, extras);
  body.request_id = requestId;
  return JSON.stringify(body);
}

/** An error as an answer: the code's status from the table, the error body, a header list of its own. */
export function errorAnswer(code: ErrorCode, message: string, requestId: string, extras?: ErrorExtras): Answer {
  return { status: statusOf(code), headers: ['Content-Type', 'application/json'], body: errorBody(code, message, requestId, extras) };
}
