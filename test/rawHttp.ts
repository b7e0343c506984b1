// A raw HTTP/1.1 client over a TCP socket, for tests that send what fetch refuses to (odd header
// bytes, many headers, any method, any body): the request goes out byte for byte, and the answer is
// read by its Content-Length or chunked framing. No answer within the time limit is a failure.
import { connect } from 'node:net';

export interface RawReply {
  status: number;
  /** Header names lower-cased; repeated headers joined with ', '. */
  headers: Map<string, string>;
  body: Buffer;
}

export interface RawRequest {
  method: string;
  /** The request target as sent (already percent-encoded where it should be). */
  target: string;
  /** Header lines as [name, value], written as they are (bytes 0-255 as latin1). */
  headers: Array<[string, string]>;
  body?: Buffer;
}

/** The request's bytes: the request line, the headers (Content-Length added for a body), the body. */
export function requestBytes(r: RawRequest): Buffer {
  let head = `${r.method} ${r.target} HTTP/1.1\r\n`;
  for (const [name, value] of r.headers) head += `${name}: ${value}\r\n`;
  if (r.body) head += `Content-Length: ${r.body.length}\r\n`;
  head += '\r\n';
  const start = Buffer.from(head, 'latin1');
  return r.body ? Buffer.concat([start, r.body]) : start;
}

/** Sends `bytes` to 127.0.0.1:`port` and reads one answer; rejects when none comes within `timeoutMs`. */
export function rawExchange(port: number, bytes: Buffer, opts: { head?: boolean; timeoutMs?: number } = {}): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = Buffer.alloc(0);
    let settled = false;
    const settle = (error: Error | null, reply?: RawReply) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(reply as RawReply);
    };
    const timer = setTimeout(
      () => settle(new Error(`no answer within ${opts.timeoutMs ?? 5000} ms; received ${JSON.stringify(received.subarray(0, 300).toString('latin1'))}`)),
      opts.timeoutMs ?? 5000,
    );
    socket.on('error', (e) => settle(new Error(`socket error: ${e.message}`)));
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      const reply = parseReply(received, opts.head ?? false, false);
      if (reply) settle(null, reply);
    });
    socket.on('end', () => {
      const reply = parseReply(received, opts.head ?? false, true);
      settle(
        reply ? null : new Error(`connection closed without a whole answer; received ${JSON.stringify(received.subarray(0, 300).toString('latin1'))}`),
        reply ?? undefined,
      );
    });
    socket.write(bytes);
  });
}

/**
 * Sends `bytes` (several requests, pipelined in one write) and reads `count` answers in the order
 * they come; rejects when they have not all come within `timeoutMs`, or the socket closes first.
 */
export function rawExchangeAll(port: number, bytes: Buffer, count: number, opts: { timeoutMs?: number } = {}): Promise<RawReply[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = Buffer.alloc(0);
    const replies: RawReply[] = [];
    let settled = false;
    const settle = (error: Error | null) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(replies);
    };
    const seen = () =>
      `${replies.length} of ${count} answers (${replies.map((r) => r.status).join(', ')}); then ${JSON.stringify(received.subarray(0, 300).toString('latin1'))}`;
    const timer = setTimeout(() => settle(new Error(`no answer within ${opts.timeoutMs ?? 5000} ms: ${seen()}`)), opts.timeoutMs ?? 5000);
    socket.on('error', (e) => settle(new Error(`socket error: ${e.message}: ${seen()}`)));
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      for (let next = replyAt(received, false, false); next; next = replyAt(received, false, false)) {
        replies.push(next.reply);
        received = received.subarray(next.used);
        if (replies.length === count) return settle(null);
      }
    });
    socket.on('end', () => settle(new Error(`connection closed: ${seen()}`)));
    socket.write(bytes);
  });
}

/** One whole answer from the bytes so far, or null while more are needed. */
function parseReply(data: Buffer, head: boolean, ended: boolean): RawReply | null {
  return replyAt(data, head, ended)?.reply ?? null;
}

/** The first whole answer in `data` and how many bytes it took, or null while more are needed. */
function replyAt(data: Buffer, head: boolean, ended: boolean, skipped = 0): { reply: RawReply; used: number } | null {
  const end = data.indexOf('\r\n\r\n');
  if (end === -1) return null;
  const lines = data.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (!m) throw new Error(`not an HTTP status line: ${JSON.stringify(lines[0])}`);
  const status = Number(m[1]);
  if (status >= 100 && status < 200) return replyAt(data.subarray(end + 4), head, ended, skipped + end + 4); // 100 Continue, then the answer
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers.set(name, headers.has(name) ? `${headers.get(name)}, ${value}` : value);
  }
  const rest = data.subarray(end + 4);
  const at = skipped + end + 4;
  if (head || status === 204 || status === 304) return { reply: { status, headers, body: Buffer.alloc(0) }, used: at };
  if (/chunked/i.test(headers.get('transfer-encoding') ?? '')) {
    const body = dechunk(rest);
    return body ? { reply: { status, headers, body: body.body }, used: at + body.used } : null;
  }
  const length = headers.get('content-length');
  if (length !== undefined)
    return rest.length >= Number(length) ? { reply: { status, headers, body: rest.subarray(0, Number(length)) }, used: at + Number(length) } : null;
  return ended ? { reply: { status, headers, body: rest }, used: at + rest.length } : null;
}

/** A chunked body once its last chunk has arrived (and the bytes it took), else null. */
function dechunk(data: Buffer): { body: Buffer; used: number } | null {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd === -1) return null;
    const size = Number.parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) throw new Error('bad chunk size');
    if (size === 0) {
      const last = data.indexOf('\r\n', lineEnd + 2); // the blank line after the last chunk (no trailers sent)
      return last === -1 ? null : { body: Buffer.concat(parts), used: last + 2 };
    }
    if (data.length < lineEnd + 2 + size + 2) return null;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}
