// In charge of the acceptor's side of the recorder thread: starting it, and its requests (flush,
// stop) and replies (ready, done, events, dropped) as the typed messages of contract/messages.ts.
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { channel, type DrainMessage, type EventRow, type RecorderReply, type RecorderRequest } from '../contract/messages.js';
import { unpackEvents } from '../contract/runs.js';
import type { RecorderSettings } from './recorder.js';
import { logger } from '../log.js';

const ENTRY = fileURLToPath(new URL('../../workers/recorder.js', import.meta.url));

export interface RecorderClient {
  /** Resolves once every run made so far, by any of the `executors`, is in the store. */
  flush(executors: number): Promise<void>;
  /** Waits for `executors` final batches, writes them and stops the thread. */
  stop(executors: number): Promise<void>;
}

/**
 * Starts the recorder thread; resolves once it listens, so executors started after it miss no run.
 * Written events come packed; they are unpacked for `onEvents` only while `listening()` (someone
 * follows /events), so the acceptor spends nothing on them otherwise.
 */
export async function startRecorder(
  settings: RecorderSettings,
  onEvents: (rows: EventRow[]) => void,
  onDropped: (runs: number) => void = () => undefined,
  listening: () => boolean = () => true,
): Promise<RecorderClient> {
  const worker = new Worker(ENTRY, { workerData: settings });
  let next = 0;
  const pending = new Map<number, () => void>();
  const ready = new Promise<void>((resolve, reject) => {
    worker.once('error', reject);
    worker.on('message', (m: RecorderReply) => {
      if (m.kind === 'events') {
        if (listening()) onEvents(unpackEvents(m.events));
      } else if (m.kind === 'dropped') onDropped(m.runs);
      else if (m.kind === 'ready') resolve();
      else {
        pending.get(m.id)?.();
        pending.delete(m.id);
      }
    });
  });
  worker.on('error', (e) => logger('recorder').error({ err: e }, 'the recorder thread failed'));
  await ready;
  const ask = (m: RecorderRequest) =>
    new Promise<void>((resolve) => {
      pending.set(m.id, resolve);
      worker.postMessage(m);
    });
  const drain = channel('drain', settings.home);
  return {
    flush(executors) {
      const id = ++next;
      drain.postMessage({ kind: 'flush', id } satisfies DrainMessage); // each executor posts its batch now
      return ask({ op: 'flush', id, executors });
    },
    async stop(executors) {
      await ask({ op: 'stop', id: ++next, executors });
      await worker.terminate();
      drain.close();
    },
  };
}
