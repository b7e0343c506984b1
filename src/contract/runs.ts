// In charge of runs as they cross threads: packed column by column (PackedRuns) instead of one object
// per run. A structured clone of objects walks every property of every run (measured ~1-2 µs a run on
// each side); the packed form is one Float64Array (copied whole) and the batch's distinct texts, each
// once: a batch of runs mostly repeats the same queries, keys, connection and second. The packed type,
// PackedRuns, is a message type of contract/messages.ts; this module packs and unpacks it.
import type { EventRow, PackedRuns, RunRecord } from './messages.js';

/** A run's cells, in order. Numbers that may be null are NaN for null. */
enum Field {
  Query, // text
  Version, // number
  Kind, // 0 saved, 1 adhoc
  ExecutedAt, // text
  Status, // 0 success, 1 error
  Connection, // text
  Key, // text
  RequestId, // text
  Rows, // number
  DurationMs, // number
  SerializationMs, // number
  Transport, // text
  /** The optional fields (error, code, masked, and an ad-hoc run's sql, sql_truncated, sql_sha256, params) as JSON, or -1. */
  Extra,
}
const FIELDS = 13;

/** Fills one batch at a time; `take` hands it over packed and starts the next. */
export class RunPacker {
  #cells: Float64Array;
  #texts: string[] = [];
  #index = new Map<string, number>();
  #n = 0;
  /** The last mask list met alone in a run, and its JSON: a governed plan and key's runs all hold one array (hasOwnExtra). */
  #masked: { list: RunRecord['masked']; json: string } | null = null;

  /** `capacity`: the most runs one batch holds. */
  constructor(readonly capacity: number) {
    this.#cells = new Float64Array(capacity * FIELDS);
  }

  get size(): number {
    return this.#n;
  }

  /** Adds a run; the caller keeps the batch within `capacity`. */
  add(run: RunRecord): void {
    const c = this.#cells;
    const at = this.#n++ * FIELDS;
    c[at + Field.Query] = this.#text(run.query);
    c[at + Field.Version] = run.version ?? Number.NaN;
    c[at + Field.Kind] = run.kind === 'adhoc' ? 1 : 0;
    c[at + Field.ExecutedAt] = this.#text(run.executed_at);
    c[at + Field.Status] = run.status === 'error' ? 1 : 0;
    c[at + Field.Connection] = this.#text(run.connection_name);
    c[at + Field.Key] = this.#text(run.key_name);
    c[at + Field.RequestId] = this.#texts.push(run.request_id) - 1; // one per call: not worth a lookup
    c[at + Field.Rows] = run.rows ?? Number.NaN;
    c[at + Field.DurationMs] = run.duration_ms ?? Number.NaN;
    c[at + Field.SerializationMs] = run.serialization_ms ?? Number.NaN;
    c[at + Field.Transport] = this.#text(run.transport);
    c[at + Field.Extra] = hasOwnExtra(run) ? this.#text(extraJson(run)) : run.masked !== undefined ? this.#text(this.#maskedJson(run)) : -1;
  }

  /** A run's mask list alone as JSON, made once while the runs hold the same array. */
  #maskedJson(run: RunRecord): string {
    let last = this.#masked;
    if (last === null || last.list !== run.masked) {
      last = { list: run.masked, json: extraJson(run) };
      this.#masked = last;
    }
    return last.json;
  }

  /** The batch so far, packed (its cells copied out), and an empty one to fill next. */
  take(): PackedRuns {
    const packed: PackedRuns = { n: this.#n, texts: this.#texts, cells: this.#cells.slice(0, this.#n * FIELDS) };
    this.#texts = [];
    this.#index.clear();
    this.#n = 0;
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

/** Packs runs (or events, when each has an id) in one go. */
export function packRuns(runs: ReadonlyArray<RunRecord | EventRow>): PackedRuns {
  const p = new RunPacker(runs.length);
  for (const r of runs) p.add(r);
  const packed = p.take();
  if (runs.length && 'id' in runs[0]) packed.ids = Float64Array.from(runs as EventRow[], (r) => r.id);
  return packed;
}

/**
 * The runs as objects, their fields in the order record() gives them (so their JSON reads the same). Runs whose optional
 * fields had one text share what it reads as (a governed plan and key's runs, one mask list), as they did before they
 * were packed: the event log then makes its JSON once for them (store/events.ts shareFields).
 */
export function unpackRuns(p: PackedRuns): RunRecord[] {
  const out = new Array<RunRecord>(p.n);
  const extras = new Map<number, Partial<RunRecord>>();
  const { texts: t, cells: c } = p;
  const text = (i: number) => (i < 0 ? null : t[i]);
  const num = (x: number) => (Number.isNaN(x) ? null : x);
  for (let r = 0, at = 0; r < p.n; r++, at += FIELDS) {
    const run: RunRecord = {
      query: text(c[at + Field.Query]),
      version: num(c[at + Field.Version]),
      kind: c[at + Field.Kind] === 1 ? 'adhoc' : 'saved',
      executed_at: t[c[at + Field.ExecutedAt]],
      status: c[at + Field.Status] === 1 ? 'error' : 'success',
      connection_name: text(c[at + Field.Connection]),
      key_name: text(c[at + Field.Key]),
      request_id: t[c[at + Field.RequestId]],
      rows: num(c[at + Field.Rows]),
      duration_ms: num(c[at + Field.DurationMs]),
      serialization_ms: num(c[at + Field.SerializationMs]),
      transport: t[c[at + Field.Transport]],
    };
    const extra = c[at + Field.Extra];
    if (extra >= 0) {
      let fields = extras.get(extra);
      if (fields === undefined) {
        fields = JSON.parse(t[extra]) as Partial<RunRecord>;
        extras.set(extra, fields);
      }
      Object.assign(run, fields);
    }
    out[r] = run;
  }
  return out;
}

/** Events (packed with their ids) as rows: the id first, as the event log returns them. */
export function unpackEvents(p: PackedRuns): EventRow[] {
  const runs = unpackRuns(p);
  const ids = p.ids ?? new Float64Array(p.n);
  const out = new Array<EventRow>(p.n);
  for (let i = 0; i < p.n; i++) out[i] = Object.assign({ id: ids[i] }, runs[i]);
  return out;
}

/** Whether the run has any of the optional fields (error, code, masked, an ad-hoc run's sql and params). */
export function hasExtra(run: RunRecord): boolean {
  return run.masked !== undefined || hasOwnExtra(run);
}

/**
 * Whether the run has optional fields of its own, beyond a mask list: a failure's, an ad-hoc run's. A run without them
 * but with a mask list is a governed call's that did not fail; runs of one plan and key hold the same list, the trace's
 * own array, never changed once traced (call/govern.ts).
 */
export function hasOwnExtra(run: RunRecord): boolean {
  return (
    run.error !== undefined ||
    run.code !== undefined ||
    run.sql !== undefined ||
    run.sql_truncated !== undefined ||
    run.sql_sha256 !== undefined ||
    run.params !== undefined
  );
}

const FIXED = new Set([
  'id',
  'query',
  'version',
  'kind',
  'executed_at',
  'status',
  'connection_name',
  'key_name',
  'request_id',
  'rows',
  'duration_ms',
  'serialization_ms',
  'transport',
]);

/** The run's optional fields (those hasExtra looks for, and any other beyond the fixed ones), in the order it has them, as JSON. */
export function extraJson(run: RunRecord): string {
  const extra: Record<string, unknown> = {};
  for (const k of Object.keys(run)) if (!FIXED.has(k)) extra[k] = run[k as keyof RunRecord];
  return JSON.stringify(extra);
}
