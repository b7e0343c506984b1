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

/** The answer to a call refused because every executor and the queue are full. */
export function busyAnswer(requestId: string): Answer {
  const busy = errorAnswer('unavailable', 'The server is busy; try again shortly', requestId, { retry_after: 1 });
  busy.headers.push('Retry-After', '1');
  return busy;
}

type Call = CallBatch['calls'][number];

/** `scope`: the answers channel's, as the executors were given it (ExecutorData.answers). */
export function createCallBatcher(pool: Piscina, scope: string, limits: { running: number; queue: number }): CallBatcher {
  const answers = channel('answers', scope);
  /** Every call not answered yet (queued, taken or sent), by id. */
  const waiters = new Map<number, { resolve(a: Answer): void; reject(e: unknown): void }>();
  /** Taken this turn, sent together at its end. */
  let outgoing: Call[] = [];
  /** Waiting for room, oldest first. */
  const queued: Call[] = [];
  /** Calls taken and not answered yet. */
  let running = 0;
  let nextId = 0;
  let refused = 0;

  /** Settles call `id` with `how`, unless it was settled already. */
  const settle = (id: number, how: (w: { resolve(a: Answer): void; reject(e: unknown): void }) => void): void => {
    const w = waiters.get(id);
    if (!w) return;
    waiters.delete(id);
    running--;
    how(w);
  };

  answers.onmessage = (e: MessageEvent) => {
    const { ids, answers: list } = e.data as AnswerBatch;
    for (let i = 0; i < ids.length; i++) settle(ids[i], (w) => w.resolve(list[i]));
    admit();
  };

  /** Moves queued calls into this turn's batch while there is room. */
  function admit(): void {
    while (queued.length && running < limits.running) take(queued.shift()!);
  }

  function take(call: Call): void {
    running++;
    if (outgoing.length === 0) setImmediate(send);
    outgoing.push(call);
  }

  function send(): void {
    const calls = outgoing;
    outgoing = [];
    // Resolves once every call in it is answered; a rejection means the executor failed (it died, or
    // the pool is closing): the calls not answered yet fail with it.
    pool.run({ calls } satisfies CallBatch, { name: 'batch' }).then(undefined, (err: unknown) => {
      for (const c of calls) settle(c.id, (w) => w.reject(err));
      admit();
    });
  }

  return {
    run(req, task) {
      if (running >= limits.running && queued.length >= limits.queue) {
        refused++;
        return Promise.resolve(busyAnswer(req.requestId));
      }
      return new Promise<Answer>((resolve, reject) => {
        const call: Call = { id: nextId++, task, req };
        waiters.set(call.id, { resolve, reject });
        if (running < limits.running) take(call);
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
