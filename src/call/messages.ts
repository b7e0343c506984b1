// In charge of the thread boundary: the plain, cloneable objects that cross from the acceptor to an
// executor and back. No class instances, Maps or closures, so inline and pooled modes get the same
// (a stream's MessagePort is transferred, not cloned).
import type { MessagePort } from 'node:worker_threads';

/**
 * The process's BroadcastChannels (run batches, shutdown drain, store changes, metric scrapes),
 * scoped by the server's home folder so two servers in one process (as in tests) never cross-talk.
 */
export function channel(name: 'runs' | 'drain' | 'changes' | 'metrics', scope: string): BroadcastChannel {
  const c = new BroadcastChannel(`queryapigate:${name}:${scope}`);
  (c as unknown as { unref?: () => void }).unref?.(); // never keeps a thread alive on its own
  return c;
}

/** One /q/ call as the acceptor read it off the socket. */
export interface CallTask {
  requestId: string;
  method: 'GET' | 'POST';
  name: string;
  /** The raw query string, without the leading '?'. */
  query: string;
  apiKey: string;
  ifNoneMatch: string;
  /** The request body (POST), copied out of uWS. */
  body: Uint8Array | null;
  clientIp: string;
  /** For ?stream=true: the executor's end of a channel that carries the export (see StreamFrame). */
  port?: MessagePort;
}

/**
 * An export's frames, executor → acceptor: the head (status and headers), chunks of rendered rows,
 * then end (or fail, after the first byte, which drops the connection). Each data frame waits for
 * the acceptor's credit, so a slow client holds the database cursor back instead of filling memory.
 */
export type StreamFrame =
  | { t: 'head'; status: number; headers: string[]; key: string }
  | { t: 'data'; chunk: string }
  | { t: 'end' }
  | { t: 'fail' };

/** The acceptor's answers: 'more' when a chunk is written, 'cancel' when the client went away. */
export type StreamCredit = { t: 'more' } | { t: 'cancel' };

/** The answer, ready to write: status line, a flat [name, value, name, value, ...] list, body. */
export interface CallAnswer {
  status: number;
  headers: string[];
  body: string;
  /** The caller's name for the request metrics ('admin', a key's name, '-'); absent when unknown. */
  key?: string;
  /** True when the answer went out over the task's port as a stream. */
  streamed?: boolean;
}
