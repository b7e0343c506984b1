// In charge of a recorder away from the acceptor: wires a Recorder to the acceptor's requests (flush, stop) and sends
// its replies (ready, done, events, dropped) over one port. The port is the recorder thread's own
// (workers/recorder.ts) or one handed to an executor with its 'record' task (workers/executor.ts).
import type { MessagePort } from 'node:worker_threads';
import type { RecorderReply, RecorderRequest } from '../contract/messages.js';
import { packRuns } from '../contract/runs.js';
import { eventRows } from '../store/events.js';
import { Recorder, type RecorderPlace, type RecorderSettings } from './recorder.js';

/** What a recorder away from the acceptor is started with: its settings, and the flag `following` sets (Int32Array, 1 or 0). */
export interface RecorderHostData {
  settings: RecorderSettings;
  following: SharedArrayBuffer;
}

/** The executor's 'record' task (workers/executor.ts): the recorder's end of the port, moved with it, and its data. */
export interface RecordTask {
  port: MessagePort;
  data: RecorderHostData;
}

/** Runs a recorder until the acceptor asks it to stop; resolves then, with every run it held written (or counted as failed). */
export function hostRecorder(port: MessagePort, { settings, following }: RecorderHostData, place: RecorderPlace): Promise<void> {
  const follows = new Int32Array(following);
  const reply = (m: RecorderReply) => port.postMessage(m);
  const recorder = new Recorder(
    settings,
    // Sent only while someone follows /events (RecorderClient.following); else nobody would read them.
    (runs, first) => {
      if (Atomics.load(follows, 0) === 1) reply({ kind: 'events', events: packRuns(eventRows(runs, first)) });
    },
    (runs) => reply({ kind: 'dropped', runs }),
    place,
  );
  return new Promise((stopped) => {
    port.on('message', async (m: RecorderRequest) => {
      if (m.op === 'flush') {
        await recorder.flushAfter(m.id, m.executors);
      } else {
        await recorder.close(m.executors);
      }
      reply({ kind: 'done', id: m.id });
      if (m.op === 'stop') {
        port.close();
        stopped();
      }
    });
    // Listening now: the acceptor lets calls in only after this, so no early run is missed.
    reply({ kind: 'ready' });
  });
}
