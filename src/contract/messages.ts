// The ground floor's thread boundary: every message that crosses between the acceptor, the
// executors and the recorder, and the channels they travel on. Plain, cloneable data only (a
// stream's MessagePort is transferred, not cloned), so inline and pooled modes behave the same.
import type { MetricObjectWithValues, MetricValue } from 'prom-client';

/**
 * The process's BroadcastChannels, scoped by the server's home folder so two servers in one
 * process (as in tests) never cross-talk. Every instance of a name hears every message posted on it
 * by another, listening or not (the message is cloned into each), so a thread holds an instance of a
 * name only where it must hear what is posted there: one that only posts where others post too opens
 * the name for the post (`postOnce`), and what only one thread should read travels on a name only it
 * and the poster hold.
 * - runs: executors → recorder, RunBatch (every executor's batcher holds the name, so each is handed the
 *   others' batches: see recorder/batcher.ts for why it stays so);
 * - drain: acceptor → executors, DrainMessage: post the batch now (answering a history read), or the
 *   last one at shutdown (marked final);
 * - changes: acceptor (or another instance's notice) → executors, ChangeMessage;
 * - metrics: acceptor → every thread at scrape time, MetricsRequest; snapshots: each thread → acceptor,
 *   MetricsReply (posted with postOnce);
 * - cache: acceptor → every executor, CacheRequest; cacheReplies: each executor → acceptor, CacheReply (the
 *   management API's view of the in-memory response caches; with Redis the acceptor reads Redis itself
 *   and nobody listens here);
 * - executors: executor ↔ acceptor, ExecutorHello: an executor says it listens for calls (at start, and
 *   when the acceptor asks), scoped by the dispatcher (not only the home folder: call ids are the dispatcher's);
 * - calls: acceptor → one executor, CallBatch, scoped by the dispatcher and the executor's threadId;
 * - answers: that executor → acceptor, AnswerBatch (the answers to its CallBatches, a batch per executor
 *   turn), scoped as its calls channel.
 */
export type ChannelName = 'runs' | 'drain' | 'changes' | 'metrics' | 'snapshots' | 'cache' | 'cacheReplies' | 'answers' | 'executors' | 'calls';

/** On the executors channel: an executor's `threadId` listening on its calls channel, or the acceptor asking (`null`). */
export interface ExecutorHello {
  threadId: number | null;
}

export function channel(name: ChannelName, scope: string): BroadcastChannel {
  // Node cuts a channel's name at its first NUL, so a scope is escaped: a dispatcher's holds one (ExecutorData.answers).
  const c = new BroadcastChannel(`queryapigate:${name}:${scope.replaceAll('%', '%25').replaceAll('\u0000', '%00')}`);
  (c as unknown as { unref?: () => void }).unref?.(); // never keeps a thread alive on its own
  return c;
}

/**
 * Posts one message on a name this thread does not listen on, opened for the post and closed at once: held open, the
 * instance would be handed (cloned) every message the name's other posters send. The message is in the listeners'
 * queues when postMessage returns, so closing does not lose it; one thread's posts arrive in the order it made them.
 * Opening costs 6-15 µs (a probe), and a post every few dozen ms cost the gateway measurably (recorder/batcher.ts), so
 * this is for messages a thread sends now and then (a scrape's or a management request's replies).
 */
export function postOnce(name: ChannelName, scope: string, message: unknown): void {
  const c = channel(name, scope);
  try {
    c.postMessage(message);
  } finally {
    c.close();
  }
}

// ---- Executor → acceptor: a streamed export (?stream=true), over the request's own port.

/**
 * An export's frames: the head (status and headers), chunks of rendered rows, then end (or fail,
 * after the first byte, which drops the connection). A binary chunk's buffer is transferred, not
 * cloned: a text stream's rows travel as bytes in frame buffers of a fixed size, which the acceptor
 * hands back with the chunk's credit. The executor posts data only while the bytes not yet credited
 * (counted by the buffers that carry them) are within its window, so a slow client holds the database
 * cursor back instead of filling memory.
 */
export type StreamFrame =
  | { t: 'head'; status: number; headers: string[]; key: string }
  | { t: 'data'; chunk: string | Uint8Array }
  | { t: 'end' }
  | { t: 'fail' };

/**
 * The acceptor's answers: 'more' once a data chunk is written (at once, or when the socket drained),
 * one per chunk and in their order, with a binary chunk's buffer moved back (`buf`) for the executor
 * to fill again; 'cancel' when the client went away.
 */
/** `stalled`: the acceptor cut the client off because it read nothing for QUERYAPIGATE_STALL_TIMEOUT (http/respond.ts). */
export type StreamCredit = { t: 'more'; buf?: ArrayBuffer } | { t: 'cancel'; stalled?: true };

// ---- Executors → recorder: runs.

/** One run of a statement, as the history and the event log keep it. */
export interface RunRecord {
  query: string | null;
  version: number | null;
  kind: 'saved' | 'adhoc';
  executed_at: string;
  status: 'success' | 'error';
  connection_name: string | null;
  key_name: string | null;
  request_id: string;
  rows: number | null;
  duration_ms: number | null;
  serialization_ms: number | null;
  transport: string;
  error?: string;
  code?: string;
  /** Output columns a mask rule changed, with the action. */
  masked?: Array<{ column: string; action: string }>;
  /** Ad-hoc runs: the statement (QUERYAPIGATE_HISTORY_ADHOC_SQL text), whether it was cut, or its hash. */
  sql?: string;
  sql_truncated?: boolean;
  sql_sha256?: string;
  /** Ad-hoc runs: the parameter names, sorted, never their values. */
  params?: string[];
}

/** A run once the event log has given it its id. */
export interface EventRow extends RunRecord {
  id: number;
}

/**
 * Runs (or events, with `ids`) packed column by column for the crossing (contract/runs.ts packs and
 * unpacks them): `cells` holds a fixed count of numbers per run, text cells an index into `texts`.
 */
export interface PackedRuns {
  n: number;
  /** Each distinct text of the batch once (request ids as they come); text cells hold its index, -1 for null. */
  texts: string[];
  cells: Float64Array;
  /** Events only: each run's event id. */
  ids?: Float64Array;
}

/** What an executor posts on 'runs'; `final` marks its last batch before shutdown. */
export interface RunBatch {
  /** The runs, packed (contract/runs.ts): one typed array and the batch's distinct texts clone far cheaper than objects. */
  runs: PackedRuns;
  /** Runs the executor could not hold (its batch was full), counted as dropped. */
  dropped: number;
  final?: boolean;
  /** Keys used since the last batch (each at most once a minute per executor), for last_used_at. */
  used?: string[];
  /** The flush request (DrainMessage 'flush') this batch answers; every executor answers each one. */
  flushed?: number;
}

/** Acceptor → executors on 'drain'. */
export type DrainMessage = { kind: 'flush'; id: number } | { kind: 'drain' };

// ---- Acceptor ↔ a recorder away from its thread: requests and replies over one port (recorder/host.ts).

export type RecorderRequest =
  /** Write everything up to flush `id`, once every executor's batch answering it has arrived. */
  { op: 'flush'; id: number; executors: number } | { op: 'stop'; id: number; executors: number };

export type RecorderReply =
  | { kind: 'ready' }
  | { kind: 'done'; id: number }
  /** Runs written to the event log (packed, with their ids), for the live /events streams. */
  | { kind: 'events'; events: PackedRuns }
  /** Runs dropped (a batch beyond the bound), for GET /api/v1/alerts (history_dropped); rare by nature. */
  | { kind: 'dropped'; runs: number };

// ---- Acceptor → executors: store changes.

/**
 * A change to the store: made through this server's management API, or told by another instance.
 * 'connection' also replaces that connection's pools; 'all' is sent when a notice may have been missed.
 */
export type ChangeMessage = ({ kind: 'metadata' } | { kind: 'connection'; name: string } | { kind: 'all' }) & {
  /** Its number among the changes this process's feed has posted (Request.changes). */
  seq?: number;
};

// ---- Acceptor ↔ every executor: the response cache as the management API sees it (contract 3.8).

/** What a cached answer is of: the saved query's version, where it ran, its format and page. */
export interface CacheEntryMeta {
  name: string;
  version: number;
  connection: string;
  format: string;
  page?: number;
}

/** One entry as GET /api/v1/cache/entries lists it. */
export interface CacheEntryInfo {
  key: string;
  content_type: string;
  size_bytes: number;
  ttl_remaining_s: number;
  meta: CacheEntryMeta;
}

/** One entry's body, as its answer was first written (text, or a binary format's bytes). */
export interface CacheEntryBody {
  content_type: string;
  body: string | Uint8Array;
}

/** Acceptor → executors: list, read one, evict one (`key`) or all (`key` null). */
export type CacheRequest = { op: 'list'; id: number } | { op: 'read'; id: number; key: string } | { op: 'evict'; id: number; key: string | null };

/** Each executor's answer to a CacheRequest of the same id. */
export type CacheReply =
  | { kind: 'listed'; id: number; entries: CacheEntryInfo[] }
  | { kind: 'read'; id: number; entry: CacheEntryBody | null }
  | { kind: 'evicted'; id: number; removed: number };

// ---- Acceptor ↔ every thread: metric scrapes.

export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];
/** On the metrics channel: the acceptor asks every thread for its snapshot. */
export interface MetricsRequest {
  id: number;
}
/** On the snapshots channel: a thread's answer to the MetricsRequest of the same id. */
export interface MetricsReply {
  id: number;
  metrics: MetricsSnapshot;
}
