// In charge of writing run history: takes batches from every executor, keeps a bounded queue, and
// writes it to the store (the event log, then the history rings) in batches. While the store is
// unavailable the runs stay queued and are written once it answers (tried every RETRY_MS); only
// runs beyond the bound are dropped, and counted. Run on its own thread, in an executor (recorder/host.ts) or on
// the acceptor's (recorder/client.ts); knows nothing of HTTP or executors beyond the batch message.
import { attachStore, HistoryBatch, localTimestamp, type Store, type StoreLocation } from '../store/store.js';
import { channel, type RunBatch, type RunRecord } from '../contract/messages.js';
import { unpackRuns } from '../contract/runs.js';
import { recordHere, stopRecordingHere } from './batcher.js';
import { threadMetrics } from '../metrics/metrics.js';
import { EventLog } from '../store/events.js';
import { causeOf, isUnavailable } from '../store/sql.js';
import { type LogSettings, logger } from '../log.js';

export interface RecorderSettings extends StoreLocation, LogSettings {
  historyLimit: number;
  /** Ad-hoc runs kept in history (QUERYAPIGATE_HISTORY_ADHOC_LIMIT); the store's default when absent. */
  historyAdhocLimit?: number;
  eventRetention: number;
  historyFlushInterval: number;
  historyMaxPending: number;
}

/**
 * The event log is written once this many runs wait (or at each flush interval), on a thread of its own: one
 * transaction (of two page rows, store/events.ts) for 2,000 runs.
 */
const BATCH = 2000;
/**
 * On a thread that serves calls (the acceptor's inline, an executor's; a PostgreSQL store): a batch's runs and their
 * JSON live in the heap every call shares for the write's dozen turns. On the acceptor's thread, at 2,000 a batch
 * V8's scavenges copied and promoted them: inline p99 at 32 callers 5.1-6.6 → 4.4-4.7 ms, full collections 7-10 → 3-4
 * in a 10 s cell, for about 1 µs more of recording a run (bench/results/levers-2026-12-05-batch-probe,
 * levers-2026-12-05-batch, recorder-2026-12-05-batch). In an executor 2,000 lowered neither its CPU nor pooled's p99
 * (levers-2026-12-05-recorder-executor-2). Those batches were of whole lines; with short ones (store/events.ts
 * pageLine), 1,000 a batch and a page: the store's server 2.08 → 1.67 µs of CPU a run at the medians, lower in 6
 * rounds of 6, recording in all 3.97 → 3.05 (bench/results/recorder-2026-12-06-stop64-batch1000); inline at 32
 * callers, its calls per CPU-s the same, p99 lower in 3 rounds of 4, RSS after load +9 MiB at the median
 * (levers-2026-12-06-stop64-batch1000); pooled mixed, p99 higher in 3 rounds of 4 by 0.1-2.3 ms (-pooled).
 */
const SHARED_BATCH = 1000;
/**
 * History is written once this many runs are held for it (at most half the pending bound), at each flush
 * interval, and whenever asked (a history read, the last flush): fewer, larger transactions. On SQLite
 * a batch of 500 spread over the rings rewrites a page of them for almost every run; one of 5,000
 * rewrites each page once. Held, not counted: a version's runs beyond twice its ring are not held, so
 * runs of a few versions (the seeds' lookup: one) are written once a flush interval. A write of the
 * lookup's ring cost its thread about 1.7 ms of CPU, its code cold at a few writes a second, and had been
 * made every 5,000 runs. The event log is still written a batch at a time, for /events.
 */
const HISTORY_BATCH = 5000;
/** While the store is unavailable, writes are tried again this often (or at the next flush interval, if longer). */
const RETRY_MS = 500;

/** Where the recorder runs: a thread of its own, an executor's, or the acceptor's (see serve.ts for which). */
export type RecorderPlace = 'thread' | 'executor' | 'here';

export class Recorder {
  #store: Store;
  /** Runs taken from executors, oldest first, not yet in the event log. */
  #queue: RunRecord[] = [];
  /** Runs already in the event log whose history is not written yet; written before anything newer. */
  #history: HistoryBatch;
  readonly #historyBatch: number;
  readonly #batch: number;
  #channel: BroadcastChannel;
  #timer: NodeJS.Timeout;
  #writing: Promise<void> = Promise.resolve();
  /** While the store is unavailable: no write is tried before this time (Date.now() ms) unless asked to. */
  #retryAt = 0;
  /** True from a write that found the store unavailable until one succeeds (logged once each way). */
  #waiting = false;
  #finals = 0;
  /** Executors' answers per flush request, and the newest request already written. */
  #answers = new Map<number, number>();
  #flushedUpTo = 0;
  /** Keys to stamp with last_used_at on the next flush, and when each was last stamped. */
  #used = new Set<string>();
  #usedAt = new Map<string, number>();

  #metrics: ReturnType<typeof threadMetrics>;

  #events: Promise<EventLog> | null = null;
  #expiry: NodeJS.Timeout;

  /**
   * `onEvents` is told of every batch of runs once it is in the event log, with the first one's id (for /events: their
   * rows, eventRows, are made only if someone follows); `onDropped` of runs dropped (alerts).
   */
  constructor(
    readonly settings: RecorderSettings,
    readonly onEvents: (runs: RunRecord[], first: number) => void = () => undefined,
    readonly onDropped: (runs: number) => void = () => undefined,
    place: RecorderPlace = 'thread',
  ) {
    this.#batch = place === 'thread' ? BATCH : SHARED_BATCH;
    this.#channel = channel('runs', settings.home);
    this.#metrics = threadMetrics(true, settings.home, { historyPending: () => this.pending });
    this.#store = attachStore(settings, { readonly: false, max: 2 });
    this.#channel.onmessage = (e: MessageEvent) => {
      const m = e.data as RunBatch;
      this.take(m, m.runs.n ? unpackRuns(m.runs) : []);
    };
    // A batcher on this thread hands its batches over as they are (recorder/batcher.ts).
    recordHere(settings.home, this.take);
    this.#historyBatch = Math.max(1, Math.min(HISTORY_BATCH, Math.floor(settings.historyMaxPending / 2)));
    this.#history = this.#newHistory();
    this.#timer = setInterval(() => void this.flush(false, true), settings.historyFlushInterval * 1000);
    this.#eventLog().catch((e: Error) => logger('recorder').error(`the event log could not be opened: ${e.message}`));
    // A changed QUERYAPIGATE_HISTORY_LIMIT re-slots the rings once, before the first write.
    this.#writing = this.#store.resizeRings(settings.historyLimit).then(
      () => undefined,
      (e: Error) => logger('recorder').error(`history rings not resized: ${e.message}`),
    );
    // Whole segments older than the retention are dropped; never row by row.
    this.#expiry = setInterval(
      () =>
        void this.#eventLog()
          .then((log) => log.expire())
          .catch((e: Error) => logger('recorder').error(`expiry failed: ${e.message}`)),
      60_000,
    );
  }

  /** Runs held for writing: the bound QUERYAPIGATE_HISTORY_MAX_PENDING applies to these. */
  get pending(): number {
    return this.#queue.length + this.#history.held;
  }

  /** Takes a batch from an executor's batcher: what it says (`m`) and its runs. Bound, as recordHere hands it to a batcher. */
  readonly take = (m: Omit<RunBatch, 'runs'>, runs: RunRecord[]): void => {
    if (m.final) this.#finals++;
    if (m.flushed !== undefined && m.flushed > this.#flushedUpTo) this.#answers.set(m.flushed, (this.#answers.get(m.flushed) ?? 0) + 1);
    if (m.used) {
      const now = Date.now();
      for (const name of m.used) {
        if (now - (this.#usedAt.get(name) ?? 0) < 60_000) continue;
        if (this.#usedAt.size >= 100_000) this.#usedAt.clear();
        this.#usedAt.set(name, now);
        this.#used.add(name);
      }
    }
    const room = Math.max(0, this.settings.historyMaxPending - this.pending);
    this.#dropped(m.dropped + Math.max(0, runs.length - room));
    for (let i = 0; i < runs.length && i < room; i++) this.#queue.push(runs[i]);
    if (this.#queue.length >= this.#batch) void this.flush();
  };

  /**
   * Writes every run made before flush request `id`: waits (at most a second) until each of the
   * `executors` has answered it with its batch, then writes. The acceptor sends the request to the
   * executors (DrainMessage 'flush') before it asks this.
   */
  async flushAfter(id: number, executors: number): Promise<void> {
    const until = Date.now() + 1000;
    while ((this.#answers.get(id) ?? 0) < executors && Date.now() < until) await new Promise((r) => setTimeout(r, 1));
    this.#answers.delete(id);
    this.#flushedUpTo = Math.max(this.#flushedUpTo, id); // a late answer is not counted again
    await this.flush(true);
  }

  /**
   * Writes everything queued so far; batches are written one after another. While the store is
   * unavailable, a write is tried at most every RETRY_MS unless `now` (a history read, the last flush).
   * History is written too when `history` (or enough runs wait for it).
   */
  flush(now = false, history = now): Promise<void> {
    this.#writing = this.#writing.then(() => (now || Date.now() >= this.#retryAt ? this.#write(history) : undefined));
    return this.#writing;
  }

  async #write(history: boolean): Promise<void> {
    try {
      await this.#touchKeys();
      while (this.#queue.length) {
        const batch = this.#queue.slice(0, this.#batch * 5);
        let first: number;
        try {
          // Every run becomes an event (kept for the retention window); history keeps the newest per version.
          first = await (await this.#eventLog()).appendRuns(batch);
        } catch (e) {
          if (isUnavailable(e)) throw e;
          this.#queue.splice(0, batch.length);
          this.#failed(batch.length, e);
          continue;
        }
        this.#queue.splice(0, batch.length);
        this.onEvents(batch, first);
        for (let i = 0; i < batch.length; i++) this.#history.add(batch[i], first + i);
        if (this.#history.held >= this.#historyBatch) await this.#writeHistory();
      }
      if (this.#history.size && history) await this.#writeHistory();
    } catch (e) {
      // Only an unavailable store gets here: everything stays queued for the next try.
      this.#retryAt = Date.now() + RETRY_MS;
      if (!this.#waiting) {
        this.#waiting = true;
        logger('recorder').warn(
          `the store is unavailable (${(causeOf(e) as Error).message}); ${this.pending} runs kept (at most ${this.settings.historyMaxPending}) until it answers`,
        );
      }
      return;
    }
    this.#retryAt = 0;
    if (this.#waiting) {
      this.#waiting = false;
      logger('recorder').info('the store answers again; the runs kept meanwhile are written');
    }
  }

  /** The runs in the event log but not yet in history; a store that refuses them (not one unavailable) fails them. */
  async #writeHistory(): Promise<void> {
    const batch = this.#history;
    try {
      await this.#store.writeHistory(batch);
    } catch (e) {
      if (isUnavailable(e)) throw e;
      this.#history = this.#newHistory();
      this.#failed(batch.size, e);
      return;
    }
    this.#history = this.#newHistory();
    this.#metrics.metrics.historyRuns.inc({ outcome: 'recorded' }, batch.size);
  }

  #newHistory(): HistoryBatch {
    return new HistoryBatch(this.settings.historyLimit, this.settings.historyAdhocLimit);
  }

  async #touchKeys(): Promise<void> {
    if (!this.#used.size) return;
    const names = [...this.#used];
    this.#used.clear();
    try {
      await this.#store.touchKeys(names, localTimestamp());
    } catch (e) {
      if (isUnavailable(e)) {
        for (const n of names) this.#used.add(n); // stamped once the store answers
        throw e;
      }
      logger('recorder').error(`last_used_at not written: ${(e as Error).message}`);
    }
  }

  /** The event log, opened on first use and again after an open that failed. */
  #eventLog(): Promise<EventLog> {
    if (!this.#events) {
      // Short segments on SQLite: dropping one holds the write lock, so each drop stays small.
      const opening = EventLog.open(this.#store.db, {
        retentionS: this.settings.eventRetention,
        segmentS: this.#store.db.dialect === 'sqlite' ? 60 : undefined,
      });
      this.#events = opening;
      opening.catch(() => {
        if (this.#events === opening) this.#events = null;
      });
    }
    return this.#events;
  }

  #failed(n: number, e: unknown): void {
    this.#metrics.metrics.historyRuns.inc({ outcome: 'failed' }, n);
    logger('recorder').error(`could not write ${n} runs: ${(e as Error).message}`);
  }

  #dropped(n: number): void {
    if (n <= 0) return;
    this.#metrics.metrics.historyRuns.inc({ outcome: 'dropped' }, n);
    this.onDropped(n);
  }

  /** Stops after every executor's final batch has arrived (or after a 5 s safety limit). */
  async close(executors: number): Promise<void> {
    clearInterval(this.#timer);
    clearInterval(this.#expiry);
    const until = Date.now() + 5000;
    while (this.#finals < executors && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    this.#channel.close();
    stopRecordingHere(this.settings.home, this.take);
    await this.flush(true);
    // The store still unavailable at the very end: what is left cannot be kept any longer.
    if (this.pending) this.#failed(this.pending, new Error('the store was unavailable when the server stopped'));
    await this.#store.close();
    this.#metrics.close();
  }
}
