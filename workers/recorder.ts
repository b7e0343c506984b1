// The recorder thread's entry: a Recorder wired to the acceptor over this thread's own port (src/recorder/host.ts).
import { parentPort, workerData } from 'node:worker_threads';
import { configureLogs, SERVER_LOG_FD } from '../src/log.js';
import { hostRecorder, type RecorderHostData } from '../src/recorder/host.js';

const data = workerData as RecorderHostData;
configureLogs(data.settings, SERVER_LOG_FD);
void hostRecorder(parentPort!, data, 'thread');
