// In charge of picking the writer for a format: the text writers of formats.ts (json, ndjson, csv,
// tsv) and of this folder (xml, yaml), or a binary one (xlsx, parquet) that needs the columns'
// types and answers bytes; and, for ?stream=true, the encoder a stream writes its chunks with.
import type { ColumnTypes } from '../../sources/types.js';
import { CONTENT_TYPES, compileWriter, type Format, type Writer } from '../formats.js';
import { loadParquet, openParquetStream, writeParquet } from './parquet.js';
import { openXlsxStream, writeXlsx } from './xlsx.js';
import { compileXmlWriter } from './xml.js';
import { compileYamlWriter } from './yaml.js';

type Rows = readonly (readonly unknown[])[];

/**
 * A writer whose body is bytes, typed from the source's column types (and the values). Past
 * `maxBytes` of output it fails with `answer_too_large`, as the text writers do.
 */
export interface BinaryWriter {
  (rows: Rows, types: ColumnTypes | undefined, maxBytes: number): Uint8Array | Promise<Uint8Array>;
  readonly format: Format;
  readonly contentType: string;
  readonly binary: true;
}

export type AnyWriter = Writer | BinaryWriter;

/** The writer of these columns in this format; compiled once per column set (plan.ts caches it). */
export function compileAnyWriter(columns: readonly string[], format: Format): AnyWriter {
  switch (format) {
    case 'xml':
      return compileXmlWriter(columns);
    case 'yaml':
      return compileYamlWriter(columns);
    case 'xlsx':
      return binary(format, (rows, types, maxBytes) => writeXlsx(columns, rows, types, maxBytes));
    case 'parquet':
      return binary(format, async (rows, types, maxBytes) => {
        await loadParquet();
        return writeParquet(columns, rows, types, maxBytes);
      });
    default:
      return compileWriter(columns, format);
  }
}

function binary(format: Format, write: (rows: Rows, types: ColumnTypes | undefined, maxBytes: number) => Uint8Array | Promise<Uint8Array>): BinaryWriter {
  return Object.assign(write, { format, contentType: CONTENT_TYPES[format], binary: true as const });
}

/** The source's column types for the columns left after masking (a dropped column takes its type along). */
export function typesAfterMask(sourceColumns: string[], types: ColumnTypes | undefined, columns: string[]): ColumnTypes | undefined {
  if (!types || columns === sourceColumns) return types;
  return columns.map((name) => types[sourceColumns.indexOf(name)] ?? null);
}

/**
 * How a stream writes its chunks: the first batch opens it, every batch adds rows, end closes it. A
 * chunk may come later (xlsx waits for its zip to take the rows), so the stream awaits each one.
 */
export interface StreamEncoder {
  /** What goes out before the first rows ('' or an empty array: nothing). */
  head: string | Uint8Array;
  rows(rows: Rows): string | Uint8Array | Promise<Uint8Array>;
  /** The last bytes; `truncatedAfter` is the row count when the row cap ended the stream. */
  end(truncatedAfter: number | null): string | Uint8Array | Promise<Uint8Array>;
}

/** The encoder for a stream of `format` (a STREAM_FORMATS one), opened on its first batch. */
export async function openStreamEncoder(writer: AnyWriter, columns: readonly string[], first: Rows, types: ColumnTypes | undefined): Promise<StreamEncoder> {
  if (writer.format === 'parquet') {
    await loadParquet();
    const file = openParquetStream(columns, first, types);
    return { head: '', rows: file.rows, end: file.end };
  }
  if (writer.format === 'xlsx') {
    const file = openXlsxStream(columns, types);
    return { head: '', rows: file.rows, end: file.end };
  }
  if ('binary' in writer) throw new Error(`format ${writer.format} does not stream`);
  const ndjson = writer.format === 'ndjson';
  return {
    head: writer.head,
    rows: writer.chunk,
    // The signal a client can see: one last line saying the export stopped at the row cap.
    end: (truncatedAfter) =>
      truncatedAfter === null ? '' : ndjson ? `{"truncated":true,"rows":${truncatedAfter}}\n` : `# truncated after ${truncatedAfter} rows\r\n`,
  };
}
