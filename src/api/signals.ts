// In charge of what this process counts for GET /api/v1/alerts beside what the store keeps: refusals
// of each key (key_rate_limited) and runs the recorder dropped (history_dropped), in bounded
// time-bucketed counts. The acceptor notes them as answers and recorder replies pass; only the
// alerts read them.
import { localTimestamp } from '../store/store.js';

const HOUR_MS = 3_600_000;

/**
 * Counts per name in fixed time buckets (a ring per name, so bounded by `maxNames` × `buckets`):
 * `note` is O(1), `read` sums the buckets still inside the window.
 */
export class WindowCounts {
  readonly #bucketMs: number;
  readonly #buckets: number;
  readonly #maxNames: number;
  #rings = new Map<string, { at: Float64Array; n: Float64Array }>();

  constructor(bucketMs: number, buckets: number, maxNames = 10_000) {
    this.#bucketMs = bucketMs;
    this.#buckets = buckets;
    this.#maxNames = maxNames;
  }

  note(name: string, n = 1, now = Date.now()): void {
    let ring = this.#rings.get(name);
    if (!ring) {
      // Full: the name noted longest ago goes (a Map keeps insertion order).
      if (this.#rings.size >= this.#maxNames) this.#rings.delete(this.#rings.keys().next().value as string);
      ring = { at: new Float64Array(this.#buckets).fill(-1), n: new Float64Array(this.#buckets) };
      this.#rings.set(name, ring);
    }
    const b = Math.floor(now / this.#bucketMs);
    const i = b % this.#buckets;
    if (ring.at[i] !== b) {
      ring.at[i] = b;
      ring.n[i] = 0;
    }
    ring.n[i] += n;
  }

  /** Each name's count within the window (the last `buckets` buckets) and the start of its earliest bucket. */
  read(now = Date.now()): Array<{ name: string; count: number; firstMs: number }> {
    const b = Math.floor(now / this.#bucketMs);
    const out: Array<{ name: string; count: number; firstMs: number }> = [];
    for (const [name, ring] of this.#rings) {
      let count = 0;
      let first = Infinity;
      for (let i = 0; i < this.#buckets; i++) {
        if (ring.at[i] > b - this.#buckets && ring.at[i] <= b) {
          count += ring.n[i];
          first = Math.min(first, ring.at[i]);
        }
      }
      if (count > 0) out.push({ name, count, firstMs: first * this.#bucketMs });
      else this.#rings.delete(name);
    }
    return out;
  }
}

/** What this process counts for the alerts, beside what the store keeps. */
export interface AlertSignals {
  /** When this process started (open_server's since). */
  startedAt: string;
  /** 429s answered to a scoped key (or a signed-in user), per minute over the last hour. */
  refusals: WindowCounts;
  /** Runs the recorder dropped, per hour over the last day (under the name 'runs'). */
  dropped: WindowCounts;
}

export function alertSignals(): AlertSignals {
  return { startedAt: localTimestamp(), refusals: new WindowCounts(60_000, 60), dropped: new WindowCounts(HOUR_MS, 24, 1) };
}
