// The recorder thread's entry: wires a Recorder to the acceptor's messages (flush, stop).
import { parentPort, workerData } from 'node:worker_threads';
import { Recorder, type RecorderRequest, type RecorderSettings } from '../src/recorder/recorder.js';

const recorder = new Recorder(workerData as RecorderSettings, (rows) => parentPort!.postMessage({ id: -1, events: rows }));
// Listening now: the acceptor starts executors only after this, so no early run is missed.
parentPort!.postMessage({ id: 0, ready: true });
parentPort!.on('message', async (m: RecorderRequest) => {
  if (m.op === 'flush') {
    await new Promise((r) => setTimeout(r, 5)); // batches posted just before the request
    await recorder.flush();
  } else if (m.op === 'stop') {
    await recorder.close(m.executors ?? 0);
  }
  parentPort!.postMessage({ id: m.id });
  if (m.op === 'stop') parentPort!.close();
});
