// In charge of the thread boundary: the plain, cloneable objects that cross from the acceptor to an
// executor and back. No class instances, Maps or closures, so inline and pooled modes get the same.

/** One /q/ call as the acceptor read it off the socket. */
export interface CallTask {
  requestId: string;
  method: 'GET' | 'POST';
  name: string;
  /** The raw query string, without the leading '?'. */
  query: string;
  apiKey: string;
  contentType: string;
  ifNoneMatch: string;
  /** The request body (POST), copied out of uWS. */
  body: Uint8Array | null;
  clientIp: string;
  /** Date.now() when the acceptor received the request. */
  receivedAt: number;
}

/** The answer, ready to write: status line, a flat [name, value, name, value, ...] list, body. */
export interface CallAnswer {
  status: number;
  headers: string[];
  body: string;
  /** The caller's name for the request metrics ('admin', a key's name, '-'); absent when unknown. */
  key?: string;
}
