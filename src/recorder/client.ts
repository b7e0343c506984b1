// In charge of the acceptor's side of the recorder: starting it, on its own thread or on the
// acceptor's, and its requests (flush, stop). On its own thread, these and its replies (ready, done,
// events, dropped) are the typed messages of contract/messages.ts. Executors reach it the same way
// in both places: their batches go over the runs channel (recorder/batcher.ts).
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { channel, type DrainMessage, type EventRow, type RecorderReply, type RecorderRequest } from '../contract/messages.js';
import { unpackEvents } from '../contract/runs.js';
import { Recorder, type RecorderPlace, type RecorderSettings } from './recorder.js';
import { eventRows } from '../store/events.js';
import { logger } from '../log.js';

const ENTRY = fileURLToPath(new URL('../../workers/recorder.js', import.meta.url));
/**
 * The recorder thread's young generation, capped as an executor's is (http/dispatch.ts): V8 grows it to its
 * maximum under steady load, and what the recorder holds long (the queue, history's newest runs) is promoted anyway.
 * RSS after load 180 → 166 MiB, pooled with a PostgreSQL store, calls per CPU-s no lower within the noise
 * (levers-2026-12-05-recorder-thread-5). It costs V8's helper threads about 1.2 µs a run more (SQLite store: 0.72 →
 * 1.95, the recorder thread itself 6.03 → 5.92; recorder-2026-12-05-young24): paid for the RSS budget of an executor.
 */
const RECORDER_YOUNG_GENERATION_MB = 24;

export interface RecorderClient {
  /** Resolves once every run made so far, by any of the `executors`, is in the store. */
  flush(executors: number): Promise<void>;
  /** Waits for `executors` final batches, writes them and stops the recorder. */
  stop(executors: number): Promise<void>;
  /**
   * Whether anyone follows /events (false at first). A recorder thread sends the events it wrote only while
   * someone does: packing, posting and receiving them cost about 2 µs a run (bench/results/recorder-2026-12-04-follow).
   */
  following(on: boolean): void;
}

/** What the recorder thread is started with: its settings, and the flag `following` sets (Int32Array, 1 or 0). */
export interface RecorderWorkerData {
  settings: RecorderSettings;
  following: SharedArrayBuffer;
}

/**
 * Starts the recorder; resolves once it listens, so executors started after it miss no run. Written
 * events reach `onEvents` only while someone follows /events (RecorderClient.following); from the
 * thread they come packed, and only then, so the acceptor spends nothing on them otherwise.
 */
export async function startRecorder(
  settings: RecorderSettings,
  onEvents: (rows: EventRow[]) => void,
  onDropped: (runs: number) => void = () => undefined,
  place: RecorderPlace = 'thread',
): Promise<RecorderClient> {
  // Whether anyone follows /events: one flag, read here and, shared, by a recorder thread.
  const followFlag = new Int32Array(new SharedArrayBuffer(4));
  const follows = () => Atomics.load(followFlag, 0) === 1;
  const following = (on: boolean) => void Atomics.store(followFlag, 0, on ? 1 : 0);
  const drain = channel('drain', settings.home);
  let next = 0;
  /** Asks each executor for its batch now (DrainMessage 'flush'); the recorder waits for their answers to request `id`. */
  const askExecutors = () => {
    const id = ++next;
    drain.postMessage({ kind: 'flush', id } satisfies DrainMessage);
    return id;
  };
  if (place === 'here') {
    // Listening as soon as it is made: the runs channel's handler is set in the constructor.
    const recorder = new Recorder(
      settings,
      (runs, first) => {
        if (follows()) onEvents(eventRows(runs, first));
      },
      onDropped,
      place,
    );
    return {
      flush: (executors) => recorder.flushAfter(askExecutors(), executors),
      async stop(executors) {
        await recorder.close(executors);
        drain.close();
      },
      following,
    };
  }
  const worker = new Worker(ENTRY, {
    workerData: { settings, following: followFlag.buffer } satisfies RecorderWorkerData,
    resourceLimits: { maxYoungGenerationSizeMb: RECORDER_YOUNG_GENERATION_MB },
  });
  const pending = new Map<number, () => void>();
  const ready = new Promise<void>((resolve, reject) => {
    worker.once('error', reject);
    worker.on('message', (m: RecorderReply) => {
      if (m.kind === 'events') {
        if (follows()) onEvents(unpackEvents(m.events)); // (those written before the last stream closed are not)
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
  return {
    flush: (executors) => ask({ op: 'flush', id: askExecutors(), executors }),
    async stop(executors) {
      await ask({ op: 'stop', id: ++next, executors });
      await worker.terminate();
      drain.close();
    },
    following,
  };
}
