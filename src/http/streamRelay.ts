// In charge of the acceptor's side of a streamed export: it hands the call a MessagePort, turns the
// executor's head frame into a streamed answer, writes each chunk to the socket and returns a
// credit once the socket took it (at once, or on drain), with the chunk's buffer for the executor to
// fill again (uWS has copied what it could not send), and cancels the export if the client leaves.
import { MessageChannel } from 'node:worker_threads';
import type { Answer, Request } from '../contract/exchange.js';
import type { StreamCredit, StreamFrame } from '../contract/messages.js';
import type { CallTask } from '../contract/crossing.js';
import type { Dispatcher } from './dispatch.js';
import { plainRequest, type StreamOut, type StreamStart } from './respond.js';

export function relayStream(req: Request, dispatcher: Dispatcher, task: CallTask = 'call'): Promise<Answer | StreamStart> {
  const { port1, port2 } = new MessageChannel();
  const withPort: Request = { ...plainRequest(req), port: port2 };
  return new Promise((resolve) => {
    let out: StreamOut | null = null;
    let finished = false;
    const early: StreamFrame[] = []; // frames that came before the socket was ready
    const credit = (m: StreamCredit) => port1.postMessage(m);
    const apply = (f: StreamFrame) => {
      const o = out!;
      if (f.t === 'data') {
        const chunk = f.chunk;
        const more = () => {
          if (typeof chunk === 'string') credit({ t: 'more' });
          else port1.postMessage({ t: 'more', buf: chunk.buffer as ArrayBuffer } satisfies StreamCredit, [chunk.buffer as ArrayBuffer]);
        };
        if (o.write(chunk)) more();
        else o.onDrain(more);
      } else if (f.t === 'end' || f.t === 'fail') {
        finished = true;
        port1.close();
        if (f.t === 'end') o.end();
        else o.abort(); // after the first byte the status can't change: the client sees a cut stream
      }
    };
    port1.on('message', (f: StreamFrame) => {
      if (f.t === 'head') {
        resolve({
          status: f.status,
          headers: f.headers,
          key: f.key,
          start(o) {
            out = o;
            o.onClose((stalled) => {
              if (!finished) {
                finished = true;
                credit(stalled ? { t: 'cancel', stalled } : { t: 'cancel' }); // the executor stops the cursor and frees its connection
                port1.close();
              }
            });
            for (const e of early.splice(0)) apply(e);
          },
        });
      } else if (out) apply(f);
      else early.push(f);
    });
    dispatcher.run(withPort, [port2], task).then(
      (answer) => {
        if (!answer.streamed) {
          port1.close();
          resolve(answer); // refused before the first byte: an ordinary answer
        }
      },
      (e) => {
        port1.close();
        resolve(Promise.reject(e));
      },
    );
  });
}

/** ?stream=1|true|yes|on in the query string. */
export function wantsStream(query: string): boolean {
  return /(?:^|&)stream=(?:1|true|yes|on)(?:&|$)/i.test(query);
}
