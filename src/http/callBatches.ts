// In charge of carrying /q/ and /execute_sql calls to the executors in batches: every call taken in
// one turn of the acceptor's event loop crosses as one CallBatch, and each executor posts its answers
// a turn at a time on its own answers channel (call/answerBatches.ts), each call answered as soon as it
// is done; both cross as flat arrays (contract/crossing.ts). A batch goes to the executor with the
// fewest calls in hand, on that executor's own `calls` channel once it has said it listens there, as a
// piscina task until then (at start; its answers are the task's result): a task costs a second message
// (its completion) and piscina's own work (bench/handoff.ts: a piscina round trip per call 18-23 µs of
// CPU on this machine's kind; a task per turn 8.4, the calls channel 6.4, lower in every round:
// bench/results/handoff-2026-12-04).
// Each executor's two channels are its own: a BroadcastChannel clones every message into every other
// instance of its name in the process, so one answers channel for all executors made each one
// deserialize every other's answers (bench/results/levers-2026-12-05-executors).
// piscina stays the pool: it starts, replaces and stops the executors; a batch in the hands of one that
// died fails with it, as its task would.
// The calls are bounded here: at most `running` at once, `queue` more waiting for room, and the rest
// refused at once (503 unavailable) and counted.
import type { Piscina } from 'piscina';
import { ANSWER_SLOTS, type AnswerBatch, answerAt, answerIdAt, CALL_SLOTS, type CallBatch, type CallTask, callIdAt, packCall } from '../contract/crossing.js';
import { ADDRESS_UNREAD, type Answer, errorAnswer, type Request } from '../contract/exchange.js';
import { channel, type ExecutorHello } from '../contract/messages.js';
import { PendingCalls } from './pendingCalls.js';

export interface CallBatcher {
  /**
   * `ip` and `changes`: what the call crosses with in their place (contract/crossing.ts `packCall`). A call that crossed
   * without its address (ADDRESS_UNREAD) and is answered that a rule needs it is handed to `addressNeeded` (below), and
   * its promise settles with that call's answer.
   */
  run(req: Request, task: CallTask, ip?: string, changes?: number): Promise<Answer>;
  /** Calls taken or queued and not answered yet. */
  readonly pending: number;
  /** Calls refused because the queue was full. */
  readonly refused: number;
  close(): void;
}

/**
 * What the batcher hands back to its dispatcher, so no call needs a promise of its own for them: a call to send again
 * with its address (by default, sent again with `req.ip`), and the moment no call is pending (shutdown waits for it).
 */
export interface BatcherHooks {
  addressNeeded(req: Request, task: CallTask): Promise<Answer>;
  idle(): void;
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
  ip: string;
  changes: number | undefined;
}

interface Waiter {
  resolve(a: Answer | Promise<Answer>): void;
  reject(e: unknown): void;
  /** The executor (threadId) its batch went to on its calls channel, or NO_EXECUTOR. */
  executor: number;
  /** The call, while it crossed without its address (it may be sent again with it); null otherwise. */
  unread: Request | null;
  task: CallTask;
}
const NO_EXECUTOR = -1;

/** An executor listening on its own calls channel (answering on its own answers channel), and how many calls it has in hand. */
interface Listening {
  threadId: number;
  calls: BroadcastChannel;
  answers: BroadcastChannel;
  load: number;
}

/** `scope`: the calls and answers channels', as the executors were given it (ExecutorData.answers). */
export function createCallBatcher(pool: Piscina, scope: string, limits: { running: number; queue: number }, hooks: Partial<BatcherHooks> = {}): CallBatcher {
  const addressNeeded = hooks.addressNeeded ?? ((req: Request, task: CallTask) => batcher.run(req, task, req.ip));
  const idle = hooks.idle ?? (() => undefined);
  const hello = channel('executors', scope);
  /** Executors that said they listen on their calls channel, by threadId. */
  const listening = new Map<number, Listening>();
  /** Every call not answered yet (queued, taken or sent), by id: at most the running and the queued. */
  const waiters = new PendingCalls<Waiter>(limits.running + limits.queue);
  /** Taken this turn, sent together at its end (packed: contract/crossing.ts). */
  let outgoing: CallBatch = [];
  /** Waiting for room, oldest first. */
  const queued: Call[] = [];
  /** Calls taken and not answered yet. */
  let running = 0;
  let refused = 0;

  /** Takes call `id`'s waiter out to settle it, unless it was settled already. */
  const claim = (id: number): Waiter | undefined => {
    const w = waiters.take(id);
    if (!w) return undefined;
    running--;
    const e = listening.get(w.executor);
    if (e) e.load--;
    return w;
  };

  hello.onmessage = (e: MessageEvent) => {
    const { threadId } = e.data as ExecutorHello;
    if (threadId === null || listening.has(threadId)) return; // a thread may say it twice
    // Only a running thread of this pool (a hello can outlive its thread).
    const worker = pool.threads.find((w) => w.threadId === threadId);
    if (!worker) return;
    const own = `${scope}:${threadId}`;
    // Its answers channel is open before the first batch leaves on its calls channel, so no answer is posted before it.
    const answers = channel('answers', own);
    answers.onmessage = (e: MessageEvent) => settle(e.data as AnswerBatch);
    listening.set(threadId, { threadId, calls: channel('calls', own), answers, load: 0 });
    worker.once('exit', () => stopped(threadId));
  };
  hello.postMessage({ threadId: null } satisfies ExecutorHello); // those that started before this listened

  /** An executor that died (or stopped with the pool) fails the calls it had in hand, as a piscina task would. */
  function stopped(executor: number): void {
    const gone = listening.get(executor);
    if (!gone) return;
    listening.delete(executor);
    gone.calls.close();
    gone.answers.close();
    const failure = new Error(`executor thread ${executor} stopped`);
    for (const id of waiters.ids()) if (waiters.get(id)?.executor === executor) claim(id)?.reject(failure);
    admit();
  }

  /** The listening executor with the fewest calls in hand, if any listens. */
  function leastLoaded(): Listening | undefined {
    let best: Listening | undefined;
    for (const e of listening.values()) if (!best || e.load < best.load) best = e;
    return best;
  }

  function settle(batch: AnswerBatch): void {
    for (let at = 0; at < batch.length; at += ANSWER_SLOTS) {
      const w = claim(answerIdAt(batch, at));
      if (!w) continue;
      const a = answerAt(batch, at);
      // Sent again before admit, so the pending count never passes through 0 meanwhile.
      w.resolve(a.addressNeeded && w.unread ? addressNeeded(w.unread, w.task) : a);
    }
    admit();
  }

  /** After calls are settled: moves queued calls into this turn's batch while there is room, and tells the dispatcher when none is left. */
  function admit(): void {
    while (queued.length && running < limits.running) {
      const call = queued.shift()!;
      take(call.id, call.task, call.req, call.ip, call.changes);
    }
    if (waiters.size === 0) idle();
  }

  function take(id: number, task: CallTask, req: Request, ip: string, changes: number | undefined): void {
    running++;
    if (outgoing.length === 0) setImmediate(send);
    packCall(outgoing, id, task, req, ip, changes);
  }

  function send(): void {
    const calls = outgoing;
    outgoing = [];
    const e = leastLoaded();
    if (e) {
      for (let at = 0; at < calls.length; at += CALL_SLOTS) {
        const w = waiters.get(callIdAt(calls, at));
        if (w) w.executor = e.threadId;
      }
      e.load += calls.length / CALL_SLOTS;
      e.calls.postMessage(calls);
      return;
    }
    // Resolves with the answers once every call in it is answered; a rejection means the executor failed
    // (it died, or the pool is closing): the calls not answered yet fail with it.
    (pool.run(calls, { name: 'batch' }) as Promise<AnswerBatch>).then(settle, (err: unknown) => {
      for (let at = 0; at < calls.length; at += CALL_SLOTS) claim(callIdAt(calls, at))?.reject(err);
      admit();
    });
  }

  const batcher: CallBatcher = {
    run(req, task, ip = req.ip, changes = req.changes) {
      if (running >= limits.running && queued.length >= limits.queue) {
        refused++;
        return Promise.resolve(busyAnswer(req.requestId));
      }
      return new Promise<Answer>((resolve, reject) => {
        const id = waiters.add({ resolve, reject, executor: NO_EXECUTOR, unread: ip === ADDRESS_UNREAD ? req : null, task });
        if (running < limits.running) take(id, task, req, ip, changes);
        else queued.push({ id, task, req, ip, changes });
      });
    },
    get pending() {
      return waiters.size;
    },
    get refused() {
      return refused;
    },
    close() {
      hello.close();
      for (const e of listening.values()) {
        e.calls.close();
        e.answers.close();
      }
      listening.clear();
    },
  };
  return batcher;
}
