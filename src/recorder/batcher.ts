// In charge of the executor's side of recording: runs are appended to a local batch that is posted
// to the recorder thread once per event-loop turn, never on the call's path. The batch is bounded;
// runs beyond it are dropped and counted, never lost silently.
import { channel, type RunBatch, type RunRecord } from '../contract/messages.js';

const KEY_USE_EVERY_MS = 60_000;

export class RunBatcher {
  #channel: BroadcastChannel;
  /** At shutdown the acceptor asks every executor, over this channel, for its last batch. */
  #drain: BroadcastChannel;
  #batch: RunRecord[] = [];
  #dropped = 0;
  #scheduled = false;
  #used: string[] = [];
  #usedAt = new Map<string, number>();
  readonly #max: number;

  constructor(max: number, scope: string) {
    this.#max = max;
    this.#channel = channel('runs', scope);
    this.#drain = channel('drain', scope);
    // The final batch travels on the same channel as the others, so it arrives after them.
    this.#drain.onmessage = () => this.flush(true);
  }

  add(run: RunRecord): void {
    if (this.#batch.length >= this.#max) this.#dropped++;
    else this.#batch.push(run);
    this.#schedule();
  }

  /** Notes that a key was used; passed on to the recorder at most once a minute per key. */
  noteKeyUse(name: string, now = Date.now()): void {
    const last = this.#usedAt.get(name);
    if (last !== undefined && now - last < KEY_USE_EVERY_MS) return;
    if (this.#usedAt.size >= 10_000) this.#usedAt.clear(); // bounded; a clear only means an extra write
    this.#usedAt.set(name, now);
    this.#used.push(name);
    this.#schedule();
  }

  #schedule(): void {
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(final = false): void {
    this.#scheduled = false;
    if (!this.#batch.length && !this.#dropped && !this.#used.length && !final) return;
    const message: RunBatch = { runs: this.#batch, dropped: this.#dropped, final };
    if (this.#used.length) {
      message.used = this.#used;
      this.#used = [];
    }
    this.#batch = [];
    this.#dropped = 0;
    this.#channel.postMessage(message);
  }

  close(): void {
    this.#channel.close();
    this.#drain.close();
  }
}
