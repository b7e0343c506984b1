// In charge of the executor's side of recording: runs are appended to a local batch that is posted
// to the recorder thread once per event-loop turn, never on the call's path. The batch is bounded;
// runs beyond it are dropped and counted, never lost silently.
import type { RunRecord } from '../store/types.js';

export const RUNS_CHANNEL = 'queryapigate:runs';

/** What an executor posts to the recorder. */
export interface RunBatchMessage {
  runs: RunRecord[];
  dropped: number;
}

export class RunBatcher {
  #channel = new BroadcastChannel(RUNS_CHANNEL);
  #batch: RunRecord[] = [];
  #dropped = 0;
  #scheduled = false;
  readonly #max: number;

  constructor(max: number) {
    this.#max = max;
    (this.#channel as unknown as { unref?: () => void }).unref?.();
  }

  add(run: RunRecord): void {
    if (this.#batch.length >= this.#max) this.#dropped++;
    else this.#batch.push(run);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  flush(): void {
    this.#scheduled = false;
    if (!this.#batch.length && !this.#dropped) return;
    const message: RunBatchMessage = { runs: this.#batch, dropped: this.#dropped };
    this.#batch = [];
    this.#dropped = 0;
    this.#channel.postMessage(message);
  }

  close(): void {
    this.#channel.close();
  }
}
