// In charge of the acceptor's side of the recorder: starting it (on its own thread, in an executor, or on the
// acceptor's thread) and its requests (flush, stop). Away from the acceptor, these and its replies (ready, done,
// events, dropped) are the typed messages of contract/messages.ts, on one port (recorder/host.ts). Executors reach it
// the same way in every place: their batches go over the runs channel (recorder/batcher.ts).
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { channel, type DrainMessage, type EventRow, type RecorderReply, type RecorderRequest } from '../contract/messages.js';
import { unpackEvents } from '../contract/runs.js';
import type { RecorderHostData } from './host.js';
import { Recorder, type RecorderPlace, type RecorderSettings } from './recorder.js';
import { eventRows } from '../store/events.js';
import { logger } from '../log.js';

const ENTRY = fileURLToPath(new URL('../../workers/recorder.js', import.meta.url));
/**
 * The recorder thread's young generation, capped as an executor's is (http/dispatch.ts): V8 grows it to its
 * maximum under steady load, and what the recorder holds long (the queue, history's newest runs) is promoted anyway.
 * RSS after load 180 → 166 MiB, pooled with a PostgreSQL store when its recorder had this thread (stop 50), calls per
 * CPU-s no lower within the noise (levers-2026-12-05-recorder-thread-5). It costs V8's helper threads about 1.2 µs a
 * run more (SQLite store, where the thread now is: 0.72 → 1.95, the recorder thread itself 6.03 → 5.92;
 * recorder-2026-12-05-young24): paid for the RSS budget of an executor.
 */
const RECORDER_YOUNG_GENERATION_MB = 24;
/**
 * How long a flush or the stop waits for the recorder's answer: beyond its own limits (a second for the executors'
 * batches, 10 s for a store write, 5 s for the final batches), so it is met only by a recorder that is gone.
 */
const ASK_LIMIT_MS = 20_000;

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

/**
 * Runs a recorder in an executor, on `port`, until it is stopped (the dispatcher's 'record' task); rejects if that
 * executor fails.
 */
export type HostInExecutor = (port: MessagePort, data: RecorderHostData) => Promise<void>;

/** The acceptor's end of a recorder away from its thread: requests go out on it; closing it stops a recorder thread. */
interface RecorderPort {
  postMessage(m: RecorderRequest): void;
  close(): void;
}

/**
 * Starts the recorder; resolves once it listens, so calls let in after it lose no run. Written
 * events reach `onEvents` only while someone follows /events (RecorderClient.following); from the
 * thread they come packed, and only then, so the acceptor spends nothing on them otherwise.
 */
export async function startRecorder(
  settings: RecorderSettings,
  onEvents: (rows: EventRow[]) => void,
  onDropped: (runs: number) => void = () => undefined,
  place: RecorderPlace = 'thread',
  host?: HostInExecutor,
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
  const data: RecorderHostData = { settings, following: followFlag.buffer };
  const pending = new Map<number, () => void>();
  let port: RecorderPort;
  let stopping = false;
  /** Starts the recorder away from this thread; resolves once it listens. */
  const start = (): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      let ready = false;
      const onReply = (m: RecorderReply) => {
        if (m.kind === 'events') {
          if (follows()) onEvents(unpackEvents(m.events)); // (those written before the last stream closed are not)
        } else if (m.kind === 'dropped') onDropped(m.runs);
        else if (m.kind === 'ready') {
          ready = true;
          resolve();
        } else {
          pending.get(m.id)?.();
          pending.delete(m.id);
        }
      };
      if (place === 'thread') {
        const worker = new Worker(ENTRY, { workerData: data, resourceLimits: { maxYoungGenerationSizeMb: RECORDER_YOUNG_GENERATION_MB } });
        worker.once('error', reject);
        worker.on('error', (e) => logger('recorder').error({ err: e }, 'the recorder thread failed'));
        worker.on('message', onReply);
        port = { postMessage: (m) => worker.postMessage(m), close: () => void worker.terminate() };
        return;
      }
      const { port1, port2 } = new MessageChannel();
      port1.on('message', onReply);
      port = { postMessage: (m) => port1.postMessage(m), close: () => port1.close() };
      /**
       * The task's end is the last word: it comes on piscina's port, which may overtake a reply still unread on this
       * one, so whatever waits is answered before this one closes (a stop ends the task only once it is done).
       */
      const ended = () => {
        for (const done of pending.values()) done();
        pending.clear();
        port1.close();
      };
      host!(port2, data).then(ended, (e: Error) => {
        ended();
        if (!ready) return reject(e);
        if (stopping) return;
        // Its executor failed (piscina replaces it): the runs that recorder held are lost with it; requests waiting
        // on it were answered above (a history read then shows what reached the store). Another starts at once.
        logger('recorder').error({ err: e }, 'the executor holding the recorder failed; the runs it held are lost; the recorder starts again');
        startAgain();
      });
    });
  /** After its executor failed: tried every second until it listens (piscina may refuse the task meanwhile) or the stop. */
  const startAgain = (): void => {
    if (stopping) return;
    start().catch((err: Error) => {
      logger('recorder').error({ err }, 'the recorder could not start again; trying again in a second');
      setTimeout(startAgain, 1000).unref();
    });
  };
  await start();
  const ask = (m: RecorderRequest) =>
    new Promise<void>((resolve) => {
      // A recorder that does not answer (gone with its thread) holds neither a history read nor the stop for ever.
      const timer = setTimeout(() => {
        if (!pending.delete(m.id)) return;
        logger('recorder').warn(`the recorder did not answer a ${m.op} within ${ASK_LIMIT_MS / 1000} s; going on without it`);
        resolve();
      }, ASK_LIMIT_MS);
      pending.set(m.id, () => {
        clearTimeout(timer);
        resolve();
      });
      port.postMessage(m);
    });
  return {
    flush: (executors) => ask({ op: 'flush', id: askExecutors(), executors }),
    async stop(executors) {
      stopping = true;
      await ask({ op: 'stop', id: ++next, executors });
      port.close();
      drain.close();
    },
    following,
  };
}
