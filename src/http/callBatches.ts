// In charge of carrying /q/ and /execute_sql calls to the executors in batches: every call taken in
// one turn of the acceptor's event loop crosses as one piscina task (a CallBatch), and each executor
// posts its answers a turn at a time on the `answers` channel (call/answerBatches.ts), each call
// answered as soon as it is done; both cross as flat arrays (contract/crossing.ts). A piscina round
// trip per call cost 18-23 µs of CPU on this machine's kind, a batched one 6-8 (32 calls in flight, an
// executor that answers at once: bench/handoff.ts).
// Since piscina's own limits count batches, the calls are bounded here: at most `running` at once,
// `queue` more waiting for room, and the rest refused at once (503 unavailable) and counted.
import type { Piscina } from 'piscina';
import { ANSWER_SLOTS, type AnswerBatch, answerAt, answerIdAt, CALL_SLOTS, type CallBatch, type CallTask, callIdAt, packCall } from '../contract/crossing.js';
import { type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import { channel } from '../contract/messages.js';

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

interface Call {
  id: number;
  task: CallTask;
  req: Request;
}

/** `scope`: the answers channel's, as the executors were given it (ExecutorData.answers). */
export function createCallBatcher(pool: Piscina, scope: string, limits: { running: number; queue: number }): CallBatcher {
  const answers = channel('answers', scope);
  /** Every call not answered yet (queued, taken or sent), by id. */
  const waiters = new Map<number, { resolve(a: Answer): void; reject(e: unknown): void }>();
  /** Taken this turn, sent together at its end (packed: contract/crossing.ts). */
  let outgoing: CallBatch = [];
  /** Waiting for room, oldest first. */
  const queued: Call[] = [];
  /** Calls taken and not answered yet. */
  let running = 0;
  let nextId = 0;
  let refused = 0;

  /** Takes call `id`'s waiter out to settle it, unless it was settled already. */
  const claim = (id: number): { resolve(a: Answer): void; reject(e: unknown): void } | undefined => {
    const w = waiters.get(id);
    if (!w) return undefined;
    waiters.delete(id);
    running--;
    return w;
  };

  answers.onmessage = (e: MessageEvent) => {
    const batch = e.data as AnswerBatch;
    for (let at = 0; at < batch.length; at += ANSWER_SLOTS) {
      claim(answerIdAt(batch, at))?.resolve(answerAt(batch, at));
    }
    admit();
  };

  /** Moves queued calls into this turn's batch while there is room. */
  function admit(): void {
    while (queued.length && running < limits.running) {
      const call = queued.shift()!;
      take(call.id, call.task, call.req);
    }
  }

  function take(id: number, task: CallTask, req: Request): void {
    running++;
    if (outgoing.length === 0) setImmediate(send);
    packCall(outgoing, id, task, req);
  }

  function send(): void {
    const calls = outgoing;
    outgoing = [];
    // Resolves once every call in it is answered; a rejection means the executor failed (it died, or
    // the pool is closing): the calls not answered yet fail with it.
    pool.run(calls, { name: 'batch' }).then(undefined, (err: unknown) => {
      for (let at = 0; at < calls.length; at += CALL_SLOTS) claim(callIdAt(calls, at))?.reject(err);
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
        const id = nextId++;
        waiters.set(id, { resolve, reject });
        if (running < limits.running) take(id, task, req);
        else queued.push({ id, task, req });
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
