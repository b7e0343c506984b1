// In charge of runs as they cross threads: packed (PackedRuns) instead of one object per run. A structured clone of
// objects walks every property of every run (measured ~1-2 µs a run on each side); the packed form is one
// Float64Array of cells, the batch's distinct texts (queries, keys, timestamps) once each, and every run's payload
// (payloadJson: the fields without a column of their own) as UTF-8 bytes, made where the run was. The recorder writes
// the event log and history from those bytes: no run object or JSON string of it lives on the recorder's thread, which
// with a PostgreSQL store is the acceptor's, where runs held through a write had outlived V8's scavenges there
// (bench/results/levers-2026-12-05-recorder-bytes). The packed type, PackedRuns, is a message type of
// contract/messages.ts; this module packs it and reads it.
import type { EventRow, PackedRuns, RunRecord } from './messages.js';

/** A run's cells, in order. Text cells hold an index into `texts` (-1 for null). */
export enum RunCell {
  Query, // text
  Version, // number, NaN for null
  Kind, // 0 saved, 1 adhoc
  ExecutedAt, // text
  Status, // 0 success, 1 error
  Key, // text
  /** Where the run's payload ends in `payloads` (it starts where the run before it ended). */
  PayloadEnd,
}
export const RUN_CELLS = 7;

/** Fills one batch at a time; `take` hands it over packed and starts the next. */
export class RunPacker {
  #cells: Float64Array;
  #texts: string[] = [];
  #index = new Map<string, number>();
  #n = 0;
  #bytes: Buffer;
  #used = 0;
  #backslashes = false;

  /** `capacity`: the most runs one batch holds. */
  constructor(readonly capacity: number) {
    this.#cells = new Float64Array(capacity * RUN_CELLS);
    this.#bytes = Buffer.allocUnsafe(Math.max(1024, capacity * 256));
  }

  get size(): number {
    return this.#n;
  }

  /** Adds a run; the caller keeps the batch within `capacity`. */
  add(run: RunRecord): void {
    const c = this.#cells;
    const at = this.#n++ * RUN_CELLS;
    c[at + RunCell.Query] = this.#text(run.query);
    c[at + RunCell.Version] = run.version ?? Number.NaN;
    c[at + RunCell.Kind] = run.kind === 'adhoc' ? 1 : 0;
    c[at + RunCell.ExecutedAt] = this.#text(run.executed_at);
    c[at + RunCell.Status] = run.status === 'error' ? 1 : 0;
    c[at + RunCell.Key] = this.#text(run.key_name);
    const json = payloadJson(run);
    const room = this.#used + 3 * json.length; // UTF-8 takes at most 3 bytes a UTF-16 unit
    if (room > this.#bytes.length) {
      const bigger = Buffer.allocUnsafe(Math.max(room, 2 * this.#bytes.length));
      this.#bytes.copy(bigger, 0, 0, this.#used);
      this.#bytes = bigger;
    }
    this.#used += this.#bytes.write(json, this.#used, 'utf8');
    if (!this.#backslashes && json.includes('\\')) this.#backslashes = true;
    c[at + RunCell.PayloadEnd] = this.#used;
  }

  /** The batch so far, packed (its cells and bytes copied out), and an empty one to fill next. */
  take(): PackedRuns {
    const packed: PackedRuns = {
      n: this.#n,
      texts: this.#texts,
      cells: this.#cells.slice(0, this.#n * RUN_CELLS),
      payloads: new Uint8Array(this.#bytes.subarray(0, this.#used)),
      backslashes: this.#backslashes,
    };
    this.#backslashes = false;
    this.#texts = [];
    this.#index.clear();
    this.#n = 0;
    this.#used = 0;
    return packed;
  }

  #text(s: string | null): number {
    if (s === null) return -1;
    let i = this.#index.get(s);
    if (i === undefined) {
      i = this.#texts.push(s) - 1;
      this.#index.set(s, i);
    }
    return i;
  }
}

/** Packs runs in one go. */
export function packRuns(runs: ReadonlyArray<RunRecord>): PackedRuns {
  const p = new RunPacker(runs.length);
  for (const r of runs) p.add(r);
  return p.take();
}

/** Run i's text cell `cell` (RunCell.Query, ExecutedAt or Key). */
export function runText(p: PackedRuns, i: number, cell: RunCell): string | null {
  const t = p.cells[i * RUN_CELLS + cell];
  return t < 0 ? null : p.texts[t];
}

export const runVersion = (p: PackedRuns, i: number): number | null => {
  const v = p.cells[i * RUN_CELLS + RunCell.Version];
  return Number.isNaN(v) ? null : v;
};
export const runIsAdhoc = (p: PackedRuns, i: number): boolean => p.cells[i * RUN_CELLS + RunCell.Kind] === 1;
export const runStatus = (p: PackedRuns, i: number): 'success' | 'error' => (p.cells[i * RUN_CELLS + RunCell.Status] === 1 ? 'error' : 'success');

/** Where run i's payload starts and ends in p.payloads. */
export const payloadStart = (p: PackedRuns, i: number): number => (i === 0 ? 0 : p.cells[i * RUN_CELLS - 1]);
export const payloadEnd = (p: PackedRuns, i: number): number => p.cells[i * RUN_CELLS + RunCell.PayloadEnd];

/** Run i's payload as text (for SQLite's writes and the rare reader; the PostgreSQL writes take the bytes). */
export function payloadText(p: PackedRuns, i: number): string {
  const s = payloadStart(p, i);
  return Buffer.from(p.payloads.buffer, p.payloads.byteOffset + s, payloadEnd(p, i) - s).toString('utf8');
}

/** The runs as objects, in the order the store gives them back (store/events.ts runOf): the columns, then the payload's fields. */
export function unpackRuns(p: PackedRuns): RunRecord[] {
  const out = new Array<RunRecord>(p.n);
  for (let i = 0; i < p.n; i++) {
    out[i] = {
      query: runText(p, i, RunCell.Query),
      executed_at: runText(p, i, RunCell.ExecutedAt) as string,
      status: runStatus(p, i),
      key_name: runText(p, i, RunCell.Key),
      ...(JSON.parse(payloadText(p, i)) as Omit<RunRecord, 'query' | 'executed_at' | 'status' | 'key_name'>),
    };
  }
  return out;
}

/** Batches of runs as events, with ids from `first` on in their order (as the event log gives them), the id first. */
export function unpackEvents(batches: ReadonlyArray<PackedRuns>, first: number): EventRow[] {
  const out: EventRow[] = [];
  let id = first;
  for (const p of batches) for (const run of unpackRuns(p)) out.push(Object.assign({ id: id++ }, run));
  return out;
}

/** Whether the run has any of the optional fields (error, code, masked, an ad-hoc run's sql and params). */
export function hasExtra(run: RunRecord): boolean {
  return (
    run.error !== undefined ||
    run.code !== undefined ||
    run.masked !== undefined ||
    run.sql !== undefined ||
    run.sql_truncated !== undefined ||
    run.sql_sha256 !== undefined ||
    run.params !== undefined
  );
}

/**
 * A run's fields that have no column of their own, as JSON: its event's payload, and its history entry, made once
 * where the run is packed. Never holds a raw tab or newline (JSON escapes them), so COPY needs only its backslashes doubled.
 */
export function payloadJson(run: RunRecord & { id?: number }): string {
  if (hasExtra(run)) {
    const { id, executed_at, query, key_name, status, ...rest } = run;
    return JSON.stringify(rest);
  }
  // Nearly every run has only the fixed fields: written one by one, in the order record() gives them (so the text is
  // the one JSON.stringify makes of the rest), 0.2 µs a run against the rest's copy and its JSON.stringify's 0.8.
  return `{"version":${jsonNumber(run.version)},"kind":${run.kind === 'adhoc' ? '"adhoc"' : '"saved"'},"connection_name":${jsonText(run.connection_name)},"request_id":${JSON.stringify(run.request_id)},"rows":${jsonNumber(run.rows)},"duration_ms":${jsonNumber(run.duration_ms)},"serialization_ms":${jsonNumber(run.serialization_ms)},"transport":${transportJson(run.transport)}}`;
}

/** Transports are a handful of names: each one's JSON made once (bounded: a name beyond them is made each time). */
const TRANSPORTS = new Map<string, string>();
function transportJson(t: string): string {
  let json = TRANSPORTS.get(t);
  if (json === undefined) {
    json = JSON.stringify(t);
    if (TRANSPORTS.size < 16) TRANSPORTS.set(t, json);
  }
  return json;
}

/** A number as JSON.stringify writes it (null, NaN and the infinities as null). */
const jsonNumber = (n: number | null): string => (n !== null && Number.isFinite(n) ? `${n}` : 'null');
const jsonText = (s: string | null): string => (s === null ? 'null' : JSON.stringify(s));
