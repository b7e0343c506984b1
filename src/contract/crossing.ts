// How batched calls and their answers cross between the acceptor and an executor
// (http/callBatches.ts, call/answerBatches.ts): as flat arrays of their fields in a fixed order, not
// as objects. A structured clone writes an object's every key and rebuilds it property by property
// on the other side; an array of the same values clones in about a third of the time
// (`node dist/bench/handoff.js` measures the hand-off whole).
import type { Answer, Request } from './exchange.js';

export type CallTask = 'call' | 'adhoc';

/** Calls handed to an executor together (one piscina task): [id, task, ...request fields] per call. */
export type CallBatch = unknown[];

/** Answers an executor finished in one turn of its loop: [id, ...answer fields] per call. */
export type AnswerBatch = unknown[];

/** Slots per call in a CallBatch, and per answer in an AnswerBatch. */
export const CALL_SLOTS = 15;
export const ANSWER_SLOTS = 7;

/**
 * Appends one call to `batch`, with the address and the changes count it crosses with (the request's own unless given:
 * the acceptor packs its socket's request as it is, without a copy that only sets these two). A stream's call (one with a
 * port) never crosses in a batch.
 */
export function packCall(batch: CallBatch, id: number, task: CallTask, req: Request, ip = req.ip, changes = req.changes): void {
  batch.push(
    id,
    task,
    req.method,
    req.url,
    req.query,
    req.requestId,
    req.apiKey,
    req.authorization,
    req.ifNoneMatch,
    req.lastEventId,
    ip,
    req.body,
    req.started,
    req.headers,
    changes,
  );
}

export const callIdAt = (batch: CallBatch, at: number): number => batch[at] as number;
export const callTaskAt = (batch: CallBatch, at: number): CallTask => batch[at + 1] as CallTask;

/** The request of the call that starts at `at`, as an object again (the executor's side). */
export function callRequestAt(b: CallBatch, at: number): Request {
  return {
    method: b[at + 2] as string,
    url: b[at + 3] as string,
    query: b[at + 4] as string,
    requestId: b[at + 5] as string,
    apiKey: b[at + 6] as string,
    authorization: b[at + 7] as string | undefined,
    ifNoneMatch: b[at + 8] as string,
    lastEventId: b[at + 9] as string,
    ip: b[at + 10] as string,
    body: b[at + 11] as Uint8Array | null,
    started: b[at + 12] as number,
    headers: b[at + 13] as Record<string, string> | undefined,
    changes: b[at + 14] as number | undefined,
  };
}

export function packAnswer(batch: AnswerBatch, id: number, a: Answer): void {
  batch.push(id, a.status, a.headers, a.body, a.key, a.streamed, a.addressNeeded);
}

export const answerIdAt = (batch: AnswerBatch, at: number): number => batch[at] as number;

/** The answer that starts at `at`, as an object again (the acceptor's side). */
export function answerAt(b: AnswerBatch, at: number): Answer {
  return {
    status: b[at + 1] as number,
    headers: b[at + 2] as string[],
    body: b[at + 3] as string | Uint8Array,
    key: b[at + 4] as string | undefined,
    streamed: b[at + 5] as boolean | undefined,
    addressNeeded: b[at + 6] as true | undefined,
  };
}
