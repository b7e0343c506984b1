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

/** One whole answer from the bytes so far, or null while more are needed. */
function parseReply(data: Buffer, head: boolean, ended: boolean): RawReply | null {
  const end = data.indexOf('\r\n\r\n');
  if (end === -1) return null;
  const lines = data.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (!m) throw new Error(`not an HTTP status line: ${JSON.stringify(lines[0])}`);
  const status = Number(m[1]);
  if (status >= 100 && status < 200) return parseReply(data.subarray(end + 4), head, ended); // 100 Continue, then the answer
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers.set(name, headers.has(name) ? `${headers.get(name)}, ${value}` : value);
  }
  const rest = data.subarray(end + 4);
  if (head || status === 204 || status === 304) return { status, headers, body: Buffer.alloc(0) };
  if (/chunked/i.test(headers.get('transfer-encoding') ?? '')) {
    const body = dechunk(rest);
    return body ? { status, headers, body } : null;
  }
  const length = headers.get('content-length');
  if (length !== undefined) return rest.length >= Number(length) ? { status, headers, body: rest.subarray(0, Number(length)) } : null;
  return ended ? { status, headers, body: rest } : null;
}

/** A chunked body once its last chunk has arrived, else null. */
function dechunk(data: Buffer): Buffer | null {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd === -1) return null;
    const size = Number.parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (Number.isNaN(size)) throw new Error('bad chunk size');
    if (size === 0) return Buffer.concat(parts);
    if (data.length < lineEnd + 2 + size + 2) return null;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}
