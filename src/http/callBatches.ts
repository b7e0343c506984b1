// In charge of carrying /q/ and /execute_sql calls to the executors in batches: every call taken in
// one turn of the acceptor's event loop crosses as one piscina task (a CallBatch), and each executor
// posts its answers a turn at a time on the `answers` channel (call/answerBatches.ts), each call
// answered as soon as it is done. A piscina round trip per call cost 23 µs of CPU on this machine's
// kind, a batched one 8 (32 calls in flight, an executor that answers at once: bench/handoff.ts).
// Since piscina's own limits count batches, the calls are bounded here: at most `running` at once,
// `queue` more waiting for room, and the rest refused at once (503 unavailable) and counted.
import type { Piscina } from 'piscina';
import { type Answer, type AnswerBatch, type CallBatch, errorAnswer, type Request } from '../contract/exchange.js';
import { channel } from '../contract/messages.js';

export type CallTask = 'call' | 'adhoc';

export interface CallBatcher {
  run(req: Request, task: CallTask): Promise<Answer>;
  /** Calls refused because the queue was full. */
  readonly refused: number;
  close(): void;
}

interface Call {
  id: number;
  task: CallTask;
  req: Request;
  resolve(a: Answer): void;
  reject(e: unknown): void;
}

/** `scope`: the answers channel's, as the executors were given it (ExecutorData.answers). */
export function createCallBatcher(pool: Piscina, scope: string, limits: { running: number; queue: number }): CallBatcher {
  const answers = channel('answers', scope);
  /** Sent to an executor, not answered yet, by id. */
  const sent = new Map<number, Call>();
  /** Taken this turn, sent together at its end. */
  let outgoing: Call[] = [];
  /** Waiting for room, oldest first. */
  const queued: Call[] = [];
  let nextId = 0;
  let refused = 0;

  answers.onmessage = (e: MessageEvent) => {
    const { ids, answers: list } = e.data as AnswerBatch;
    for (let i = 0; i < ids.length; i++) {
      const call = sent.get(ids[i]);
      if (!call) continue;
      sent.delete(ids[i]);
      call.resolve(list[i]);
    }
    admit();
  };

  const inFlight = () => sent.size + outgoing.length;

  /** Moves queued calls into this turn's batch while there is room. */
  function admit(): void {
    while (queued.length && inFlight() < limits.running) take(queued.shift()!);
  }

  function take(call: Call): void {
    if (outgoing.length === 0) setImmediate(send);
    outgoing.push(call);
  }

  function send(): void {
    const calls = outgoing;
    outgoing = [];
    if (!calls.length) return;
    const batch: CallBatch = { calls: calls.map(({ id, task, req }) => ({ id, task, req })) };
    for (const c of calls) sent.set(c.id, c);
    // Resolves once every call in it is answered; a rejection means the executor failed (it died, or
    // the pool is closing): the calls not answered yet fail with it.
    pool.run(batch, { name: 'batch' }).then(undefined, (err: unknown) => {
      for (const c of calls) {
        if (!sent.delete(c.id)) continue;
        c.reject(err);
      }
      admit();
    });
  }

  return {
    run(req, task) {
      if (inFlight() >= limits.running && queued.length >= limits.queue) {
        refused++;
        const busy = errorAnswer('unavailable', 'The server is busy; try again shortly', req.requestId, { retry_after: 1 });
        busy.headers.push('Retry-After', '1');
        return Promise.resolve(busy);
      }
      return new Promise<Answer>((resolve, reject) => {
        const call: Call = { id: nextId++, task, req, resolve, reject };
        if (inFlight() < limits.running) take(call);
        else queued.push(call);
      });
    },
    get refused() {
      return refused;
    },
    close() {
      answers.close();
    },
  };
}
