// In charge of format=parquet: typed columns, written whole for a page and by row groups for a stream.
// Library: hyparquet-writer. It is pure JavaScript with one dependency (hyparquet, its reader),
// maintained, writes synchronously (a page renders in the call's turn) and row group by row group
// (ParquetWriter.write, then finish for the footer), so a stream holds one row group at a time. It
// writes every type the contract lists. @dsnp/parquetjs pulls in an AWS SDK; parquet-wasm needs
// Arrow tables built first; DuckDB (the reference's writer) is a heavy native module.
//
// Column types (the contract's list, as DuckDB names them): integers BIGINT, or DECIMAL(38,0) when a
// value is past 64 bits; floats DOUBLE; decimals DECIMAL(38,scale) when the column declares its
// scale (MySQL, SQLite's DECIMAL(p,s)), else DOUBLE (postgres.js does not report a numeric's scale,
// and the sources hand decimals over as floats already); booleans BOOLEAN; dates DATE; timestamps
// TIMESTAMP (microseconds, not adjusted to UTC: the wall-clock value the other formats print);
// anything else VARCHAR in the CSV text form (times, text, JSON, bytes decoded as UTF-8).
// The type comes from the source's column type where it gives one and every value fits it; else from
// the values (a page: all of them; a stream: its first batch). A mix of kinds is VARCHAR. A stream
// decides on its first batch, so a later value its type cannot take ends the stream (query_failed).
import type * as HyparquetWriter from 'hyparquet-writer';
import { GatewayError } from '../../contract/errors.js';
import type { ColumnType, ColumnTypes } from '../../sources/types.js';
import { answerTooLarge, textValue, uniqueColumnNames } from '../formats.js';
import { dateMsOf, integerOf, timestampUsOf, unscaledOf } from './values.js';

type Rows = readonly (readonly unknown[])[];
type SchemaElement = ConstructorParameters<typeof HyparquetWriter.ParquetWriter>[0]['schema'][number];

/**
 * hyparquet-writer, loaded before the first parquet answer (loadParquet): imported up front it sat in
 * every thread's heap (about 1.4 MB), and an ES module cannot be required on demand.
 */
let library: typeof HyparquetWriter | null = null;

export async function loadParquet(): Promise<void> {
  library ??= await import('hyparquet-writer');
}

function parquetWriter(schema: SchemaElement[]): { writer: HyparquetWriter.ByteWriter; file: HyparquetWriter.ParquetWriter } {
  if (!library) throw new Error('hyparquet-writer is not loaded: await loadParquet() first');
  const writer = new library.ByteWriter();
  return { writer, file: new library.ParquetWriter({ writer, schema, createdBy: CREATED_BY }) };
}

/** A value that does not fit a column's type. */
const MISFIT = Symbol('misfit');

interface ParquetType {
  /** The type as DuckDB names it (for errors, docs and tests). */
  name: string;
  element: Omit<SchemaElement, 'name'>;
  /** The value as hyparquet-writer takes it for this type, or MISFIT. Never called with null. */
  convert(v: unknown): unknown;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const DECIMAL_38 = 10n ** 38n;
const DAY_MS = 86400000;

const OPTIONAL = 'OPTIONAL' as const;

const BIGINT: ParquetType = {
  name: 'BIGINT',
  element: { type: 'INT64', repetition_type: OPTIONAL },
  convert: (v) => {
    const n = integerOf(v);
    return n !== null && n >= INT64_MIN && n <= INT64_MAX ? n : MISFIT;
  },
};

const DOUBLE: ParquetType = {
  name: 'DOUBLE',
  element: { type: 'DOUBLE', repetition_type: OPTIONAL },
  convert: (v) => (typeof v === 'number' ? (Number.isFinite(v) ? v : null) : typeof v === 'bigint' ? Number(v) : MISFIT),
};

const BOOLEAN: ParquetType = {
  name: 'BOOLEAN',
  element: { type: 'BOOLEAN', repetition_type: OPTIONAL },
  convert: (v) => (typeof v === 'boolean' ? v : MISFIT),
};

const DATE: ParquetType = {
  name: 'DATE',
  element: { type: 'INT32', converted_type: 'DATE', logical_type: { type: 'DATE' }, repetition_type: OPTIONAL },
  convert: (v) => {
    const ms = dateMsOf(v);
    return ms === null ? MISFIT : ms / DAY_MS;
  },
};

const TIMESTAMP: ParquetType = {
  name: 'TIMESTAMP',
  element: { type: 'INT64', logical_type: { type: 'TIMESTAMP', isAdjustedToUTC: false, unit: 'MICROS' }, repetition_type: OPTIONAL },
  convert: (v) => timestampUsOf(v) ?? MISFIT,
};

const VARCHAR: ParquetType = {
  name: 'VARCHAR',
  element: { type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' }, repetition_type: OPTIONAL },
  convert: textValue,
};

const decimals = new Map<number, ParquetType>();

/** DECIMAL(38,scale), as 16-byte two's complement (the width precision 38 needs). */
function decimal(scale: number): ParquetType {
  let t = decimals.get(scale);
  if (!t) {
    t = {
      name: `DECIMAL(38,${scale})`,
      element: {
        type: 'FIXED_LEN_BYTE_ARRAY',
        type_length: 16,
        converted_type: 'DECIMAL',
        precision: 38,
        scale,
        logical_type: { type: 'DECIMAL', precision: 38, scale },
        repetition_type: OPTIONAL,
      },
      convert: (v) => {
        const n = scale === 0 ? integerOf(v) : unscaledOf(v, scale);
        return n !== null && n > -DECIMAL_38 && n < DECIMAL_38 ? n : MISFIT;
      },
    };
    decimals.set(scale, t);
  }
  return t;
}

/** The types to try, in order, for what the source says of a column; null: the values decide. */
function candidates(hint: ColumnType | null | undefined): ParquetType[] | null {
  switch (hint?.kind) {
    case 'integer':
      return [BIGINT, decimal(0)];
    case 'float':
      return [DOUBLE];
    case 'decimal':
      return hint.scale !== undefined && hint.scale >= 0 && hint.scale <= 37 ? [decimal(hint.scale)] : [DOUBLE];
    case 'boolean':
      return [BOOLEAN];
    case 'date':
      return [DATE];
    case 'timestamp':
      return [TIMESTAMP];
    case 'time':
    case 'text':
    case 'bytes':
    case 'json':
      return [VARCHAR];
    default:
      return null;
  }
}

/** The types the values themselves suggest: one kind of JS value throughout, else VARCHAR. */
function inferred(rows: Rows, c: number): ParquetType[] {
  let kind: string | null = null;
  let fractional = false;
  for (let r = 0; r < rows.length; r++) {
    const v = rows[r][c];
    if (v === null || v === undefined) continue;
    let k: string = typeof v;
    if (k === 'bigint') k = 'number';
    else if (v instanceof Date) k = 'date';
    if (k === 'number' && typeof v === 'number' && !Number.isInteger(v)) fractional = true;
    if (kind === null) kind = k;
    else if (kind !== k) return [VARCHAR];
  }
  if (kind === 'number') return fractional ? [DOUBLE] : [BIGINT, decimal(0), DOUBLE];
  if (kind === 'boolean') return [BOOLEAN];
  if (kind === 'date') return [TIMESTAMP];
  return [VARCHAR];
}

/** Column c's values converted to `type`, or null when one does not fit. */
function converted(type: ParquetType, rows: Rows, c: number): unknown[] | null {
  const out = new Array<unknown>(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const v = rows[r][c];
    if (v === null || v === undefined) out[r] = null;
    else {
      const x = type.convert(v);
      if (x === MISFIT) return null;
      out[r] = x;
    }
  }
  return out;
}

interface Decided {
  types: ParquetType[];
  /** The rows it was decided on, converted per column. */
  data: unknown[][];
}

/** Each column's type (the source's when its values fit, else the values'), with the rows converted. */
function decide(rows: Rows, width: number, hints: ColumnTypes | undefined): Decided {
  const types: ParquetType[] = [];
  const data: unknown[][] = [];
  for (let c = 0; c < width; c++) {
    let chosen: ParquetType = VARCHAR;
    let values: unknown[] | null = null;
    for (const t of [...(candidates(hints?.[c]) ?? []), ...inferred(rows, c)]) {
      values = converted(t, rows, c);
      if (values) {
        chosen = t;
        break;
      }
    }
    types.push(chosen);
    data.push(values ?? (converted(VARCHAR, rows, c) as unknown[]));
  }
  return { types, data };
}

/** The Parquet type names of a page's columns (DuckDB's spelling), for tests and docs. */
export function parquetTypeNames(rows: Rows, width: number, hints?: ColumnTypes): string[] {
  return decide(rows, width, hints).types.map((t) => t.name);
}

function schemaOf(names: string[], types: ParquetType[]): SchemaElement[] {
  return [{ name: 'root', num_children: names.length }, ...names.map((name, c) => ({ name, ...types[c].element }) as SchemaElement)];
}

const CREATED_BY = 'queryapigate (hyparquet-writer)';

/**
 * A page as one Parquet file, in row groups of STREAM_ROW_GROUP rows (one for a page of that many or
 * fewer); past `maxBytes` of file it is answer_too_large, checked after each row group is written.
 */
export function writeParquet(columns: readonly string[], rows: Rows, hints: ColumnTypes | undefined, maxBytes = Number.POSITIVE_INFINITY): Uint8Array {
  const names = uniqueColumnNames(columns);
  const { types, data } = decide(rows, names.length, hints);
  const { writer, file } = parquetWriter(schemaOf(names, types));
  for (let start = 0; start < Math.max(1, rows.length); start += STREAM_ROW_GROUP) {
    const end = Math.min(rows.length, start + STREAM_ROW_GROUP);
    const whole = start === 0 && end === rows.length;
    const columnData = names.map((name, c) => ({ name, data: whole ? data[c] : data[c].slice(start, end) }));
    file.write({ columnData, rowGroupSize: Math.max(1, end - start) });
    if (writer.index > maxBytes) throw answerTooLarge(maxBytes);
  }
  file.finish();
  if (writer.index > maxBytes) throw answerTooLarge(maxBytes);
  return new Uint8Array(writer.getBuffer()); // getBuffer copies out exactly the file's bytes
}

/** Rows per row group in a stream: the rows held in memory at once, converted. */
export const STREAM_ROW_GROUP = 10_000;

/** A stream's Parquet file, written a row group at a time; each call returns the bytes to send. */
export interface ParquetStream {
  /** Takes a batch; returns the row group's bytes once a group is full, else an empty array. */
  rows(rows: Rows): Uint8Array;
  /** The last row group and the footer (with `queryapigate.truncated` when the row cap stopped it). */
  end(truncatedAfter: number | null): Uint8Array;
}

/** Starts a stream's file; the first batch decides the column types (see the header). */
export function openParquetStream(columns: readonly string[], first: Rows, hints: ColumnTypes | undefined, groupRows = STREAM_ROW_GROUP): ParquetStream {
  const names = uniqueColumnNames(columns);
  const { types } = decide(first, names.length, hints);
  const { writer, file } = parquetWriter(schemaOf(names, types));
  let pending: unknown[][] = names.map(() => []);
  let held = 0;
  /** The bytes written since the last call, in a buffer of their own; the writer starts over. */
  const take = (): Uint8Array => {
    const bytes = new Uint8Array(writer.buffer.slice(0, writer.index));
    writer.index = 0;
    return bytes;
  };
  const flush = (): void => {
    if (held === 0) return;
    file.write({ columnData: names.map((name, c) => ({ name, data: pending[c] })), rowGroupSize: held });
    pending = names.map(() => []);
    held = 0;
  };
  return {
    rows(rows) {
      for (let c = 0; c < names.length; c++) {
        const out = pending[c];
        const type = types[c];
        for (let r = 0; r < rows.length; r++) {
          const v = rows[r][c];
          if (v === null || v === undefined) out.push(null);
          else {
            const x = type.convert(v);
            if (x === MISFIT) {
              throw new GatewayError(
                'query_failed',
                `Column '${names[c]}' holds a value its Parquet type ${type.name} (decided on the first rows) cannot take`,
              );
            }
            out.push(x);
          }
        }
      }
      held += rows.length;
      if (held >= groupRows) flush();
      return take();
    },
    end(truncatedAfter) {
      flush();
      if (truncatedAfter !== null) file.kvMetadata = [{ key: 'queryapigate.truncated', value: `after ${truncatedAfter} rows` }];
      file.finish();
      return take();
    },
  };
}
