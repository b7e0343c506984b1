// In charge of writing run history: takes batches from every executor, keeps a bounded queue, and
// writes it to the store in one transaction per flush. Used by workers/recorder.ts; knows nothing
// of HTTP or executors beyond the batch message.
import { attachStore, localTimestamp, type Store, type StoreLocation } from '../store/store.js';
import { channel, type EventRow, type RunBatch, type RunRecord } from '../contract/messages.js';
import { threadMetrics } from '../metrics/metrics.js';
import { EventLog } from '../store/events.js';

export interface RecorderSettings extends StoreLocation {
  historyLimit: number;
  eventRetention: number;
  historyFlushInterval: number;
  historyMaxPending: number;
}

const BATCH = 500;

export class Recorder {
  #store: Store;
  #queue: RunRecord[] = [];
  #channel: BroadcastChannel;
  #timer: NodeJS.Timeout;
  #writing: Promise<void> = Promise.resolve();
  #finals = 0;
  /** Executors' answers per flush request, and the newest request already written. */
  #answers = new Map<number, number>();
  #flushedUpTo = 0;
  /** Keys to stamp with last_used_at on the next flush, and when each was last stamped. */
  #used = new Set<string>();
  #usedAt = new Map<string, number>();

  #metrics: ReturnType<typeof threadMetrics>;

  #events: Promise<EventLog>;
  #expiry: NodeJS.Timeout;

  /** `onEvents` is told of every batch of events once it is in the log (for /events). */
  constructor(
    readonly settings: RecorderSettings,
    readonly onEvents: (rows: EventRow[]) => void = () => undefined,
  ) {
    this.#channel = channel('runs', settings.home);
    this.#metrics = threadMetrics(true, settings.home, { historyPending: () => this.#queue.length });
    this.#store = attachStore(settings, { readonly: false, max: 2 });
    this.#channel.onmessage = (e: MessageEvent) => this.take(e.data as RunBatch);
    this.#timer = setInterval(() => void this.flush(), settings.historyFlushInterval * 1000);
    // Short segments on SQLite: dropping one holds the write lock, so each drop stays small.
    this.#events = EventLog.open(this.#store.db, {
      retentionS: settings.eventRetention,
      segmentS: this.#store.db.dialect === 'sqlite' ? 60 : undefined,
    });
    this.#events.catch((e: Error) => console.error(`recorder: the event log could not be opened: ${e.message}`));
    // A changed QUERYAPIGATE_HISTORY_LIMIT re-slots the rings once, before the first write.
    this.#writing = this.#store.resizeRings(settings.historyLimit).then(
      () => undefined,
      (e: Error) => console.error(`recorder: history rings not resized: ${e.message}`),
    );
    // Whole segments older than the retention are dropped; never row by row.
    this.#expiry = setInterval(
      () => void this.#events.then((log) => log.expire()).catch((e: Error) => console.error(`recorder: expiry failed: ${e.message}`)),
      60_000,
    );
  }

  take(m: RunBatch): void {
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
    const room = this.settings.historyMaxPending - this.#queue.length;
    this.#dropped(m.dropped + Math.max(0, m.runs.length - Math.max(0, room)));
    for (let i = 0; i < m.runs.length && i < room; i++) this.#queue.push(m.runs[i]);
    if (this.#queue.length >= BATCH) void this.flush();
  }

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
    await this.flush();
  }

  /** Writes everything queued so far; batches are written one after another. */
  flush(): Promise<void> {
    this.#writing = this.#writing.then(async () => {
      if (this.#used.size) {
        const names = [...this.#used];
        this.#used.clear();
        await this.#store.touchKeys(names, localTimestamp()).catch((e: Error) => console.error(`recorder: last_used_at not written: ${e.message}`));
      }
      while (this.#queue.length) {
        const batch = this.#queue.splice(0, BATCH * 10);
        try {
          // Every run becomes an event (kept for the retention window); history keeps the newest per version.
          const events = await (await this.#events).append(batch);
          this.onEvents(events);
          await this.#store.writeRuns(events, this.settings.historyLimit);
          this.#metrics.metrics.historyRuns.inc({ outcome: 'recorded' }, batch.length);
        } catch (e) {
          this.#metrics.metrics.historyRuns.inc({ outcome: 'failed' }, batch.length);
          console.error(`recorder: could not write ${batch.length} runs: ${(e as Error).message}`);
        }
      }
    });
    return this.#writing;
  }

  #dropped(n: number): void {
    if (n <= 0) return;
    this.#metrics.metrics.historyRuns.inc({ outcome: 'dropped' }, n);
  }

  /** Stops after every executor's final batch has arrived (or after a 5 s safety limit). */
  async close(executors: number): Promise<void> {
    clearInterval(this.#timer);
    clearInterval(this.#expiry);
    const until = Date.now() + 5000;
    while (this.#finals < executors && Date.now() < until) await new Promise((r) => setTimeout(r, 5));
    this.#channel.close();
    await this.flush();
    await this.#store.close();
    this.#metrics.close();
  }
}
