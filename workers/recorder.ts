// The recorder thread's entry: wires a Recorder to the acceptor's requests (src/recorder/client.ts).
import { parentPort, workerData } from 'node:worker_threads';
import type { RecorderReply, RecorderRequest } from '../src/contract/messages.js';
import { packRuns } from '../src/contract/runs.js';
import { configureLogs, SERVER_LOG_FD } from '../src/log.js';
import type { RecorderWorkerData } from '../src/recorder/client.js';
import { Recorder } from '../src/recorder/recorder.js';
import { eventRows } from '../src/store/events.js';

const { settings, following } = workerData as RecorderWorkerData;
const follows = new Int32Array(following);
configureLogs(settings, SERVER_LOG_FD);
const port = parentPort!;
const reply = (m: RecorderReply) => port.postMessage(m);
const recorder = new Recorder(
  settings,
  // Sent only while someone follows /events (RecorderClient.following); else nobody would read them.
  (runs, first) => {
    if (Atomics.load(follows, 0) === 1) reply({ kind: 'events', events: packRuns(eventRows(runs, first)) });
  },
  (runs) => reply({ kind: 'dropped', runs }),
);
// Listening now: the acceptor starts executors only after this, so no early run is missed.
reply({ kind: 'ready' });
port.on('message', async (m: RecorderRequest) => {
  if (m.op === 'flush') {
    await recorder.flushAfter(m.id, m.executors);
  } else {
    await recorder.close(m.executors);
  }
  reply({ kind: 'done', id: m.id });
  if (m.op === 'stop') port.close();
});
