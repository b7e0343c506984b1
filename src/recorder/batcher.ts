// In charge of the executor's side of recording: runs are appended to a local batch that is posted
// to the recorder thread every few milliseconds (or sooner when it is large), never on the call's
// path: one message carries many runs. A history read asks every executor for its batch at once
// (DrainMessage 'flush'), so it still sees every run made before it. The batch is bounded; runs
// beyond it are dropped and counted, never lost silently. A batch crosses packed (contract/runs.ts), so a post
// clones one typed array and a few texts rather than an object per run; to a recorder on this very thread (the
// acceptor's inline, the executor's that holds it) it is handed as it is, with nothing packed, cloned or unpacked.
import { channel, type DrainMessage, type RunBatch, type RunRecord } from '../contract/messages.js';
import { RunPacker } from '../contract/runs.js';

/** How a recorder on the batcher's own thread takes a batch: what the message would say, and the runs themselves. */
export type TakeRuns = (head: Omit<RunBatch, 'runs'>, runs: RunRecord[]) => void;

/**
 * The recorder on this thread, by the home it records for (recorder/recorder.ts sets it). Module state is a thread's
 * own, so a batcher finds here only a recorder it shares its thread with. Handing it the runs skips the packing, the
 * post's clone and copy, the message's dispatch and the unpacking, which rebuilt every run as an object again.
 */
const recordersHere = new Map<string, TakeRuns>();

/** Sets the recorder on this thread for `home`; a later one takes its place. */
export function recordHere(home: string, take: TakeRuns): void {
  recordersHere.set(home, take);
}

/** Clears the recorder on this thread for `home`, if it is still `take` (a recorder clears only its own). */
export function stopRecordingHere(home: string, take: TakeRuns): void {
  if (recordersHere.get(home) === take) recordersHere.delete(home);
}

const KEY_USE_EVERY_MS = 60_000;
/**
 * How long runs wait for company before they are posted, and how many make a batch post at once. Each
 * post wakes the recorder thread; on a busy 2-core machine a wake-up costs the poster a context switch
 * (measured: 540-780 µs of wall time per post at 10 ms under load), so posts are few and large. The
 * recorder writes the store once a second (QUERYAPIGATE_HISTORY_FLUSH_INTERVAL) anyway, and a history
 * read drains every batch first.
 */
const POST_EVERY_MS = 50;
const POST_AT = 512;

export class RunBatcher {
  /**
   * Held open, so it is also handed every other executor's batches (one name for all of them; the recorder listens on
   * it). Posting with postOnce instead cost the gateway inline about 2.5% of its calls per CPU-s and 3.5 MiB of RSS in
   * three A/Bs (bench/results/levers-2026-12-05-inline-postonce), for about 1% with 3 executors on 2 cores.
   */
  #channel: BroadcastChannel;
  /** The acceptor asks every executor, over this channel, for its batch now or its last one. */
  #drain: BroadcastChannel;
  #runs: RunRecord[] = [];
  /** Packs a batch for the post (reused: its cells are copied out at each take). */
  #packer: RunPacker;
  readonly #home: string;
  #dropped = 0;
  #timer: NodeJS.Timeout | null = null;
  #used: string[] = [];
  #usedAt = new Map<string, number>();
  readonly #max: number;

  constructor(max: number, scope: string) {
    this.#max = max;
    this.#home = scope;
    this.#packer = new RunPacker(Math.min(max, POST_AT));
    this.#channel = channel('runs', scope);
    this.#drain = channel('drain', scope);
    // These batches travel on the same channel as the others, so they arrive after them.
    this.#drain.onmessage = (e: MessageEvent) => {
      const m = e.data as DrainMessage;
      if (m.kind === 'drain') this.flush(true);
      else this.flush(false, m.id);
    };
  }

  add(run: RunRecord): void {
    if (this.#runs.length >= this.#max) this.#dropped++;
    else this.#runs.push(run);
    if (this.#runs.length >= POST_AT) this.flush();
    else this.#schedule();
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
    this.#timer ??= setTimeout(() => this.flush(), POST_EVERY_MS);
  }

  /** Posts the batch; `final` marks the last one, `flushed` answers a flush request (posted even when empty). */
  flush(final = false, flushed?: number): void {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    const runs = this.#runs;
    if (!runs.length && !this.#dropped && !this.#used.length && !final && flushed === undefined) return;
    const head: Omit<RunBatch, 'runs'> = { dropped: this.#dropped, final };
    if (flushed !== undefined) head.flushed = flushed;
    if (this.#used.length) {
      head.used = this.#used;
      this.#used = [];
    }
    this.#runs = [];
    this.#dropped = 0;
    const here = recordersHere.get(this.#home);
    if (here) {
      here(head, runs);
      return;
    }
    for (let i = 0; i < runs.length; i++) this.#packer.add(runs[i]);
    this.#channel.postMessage({ ...head, runs: this.#packer.take() } satisfies RunBatch);
  }

  close(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#channel.close();
    this.#drain.close();
  }
}
