// In charge of `queryapigate export`: a saved query's whole result written to a file, read from a
// running server's streamed export (GET /q/NAME?stream=true), with a progress line on a terminal and
// nothing but a summary when piped. The only command that talks to a server rather than the store.
import { createWriteStream } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { KEY_OPTION, refused, serverTarget, unreachable, URL_OPTION } from './server.js';
import { commandConfig } from './settings.js';
import { type Command, Failure, UsageError } from './tree.js';

const FORMATS = ['csv', 'tsv', 'ndjson', 'parquet'];
const PROGRESS_EVERY_MS = 250;

/** Counts records as they pass: lines, except newlines inside a quoted CSV/TSV field. */
class RecordCounter extends Transform {
  records = 0;
  bytes = 0;
  /** The last bytes seen, to read the truncation marker and the final newline. */
  tail = '';
  #quoted = false;

  constructor(
    private readonly delimited: boolean,
    /** A binary file (parquet): bytes only, no records to count on the way. */
    private readonly binary = false,
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: string, done: (e?: Error | null, data?: Buffer) => void): void {
    this.bytes += chunk.length;
    for (let i = 0; i < chunk.length && !this.binary; i++) {
      const b = chunk[i];
      if (b === 0x22 && this.delimited)
        this.#quoted = !this.#quoted; // a doubled quote toggles twice
      else if (b === 0x0a && !this.#quoted) this.records++;
    }
    this.tail = (this.tail + chunk.toString('utf8', Math.max(0, chunk.length - 200))).slice(-200);
    done(null, chunk);
  }
}

function humanBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) [v, u] = [v / 1024, u + 1];
  return `${v.toFixed(1)} ${units[u]}`;
}

export const EXPORT: Command = {
  kind: 'command',
  name: 'export',
  summary: "Write a saved query's whole result to a file, streamed from a running server",
  usage: 'QUERY [options]',
  description: [
    'Talks to a running server (not the store): GET /q/QUERY?stream=true&format=FORMAT, with the key.',
    'The server is --url, else http://QUERYAPIGATE_HOST:QUERYAPIGATE_PORT; the key is --key, else',
    'QUERYAPIGATE_ADMIN_TOKEN (an administrator token), else QUERYAPIGATE_API_KEY (the admin key; the environment or ./.env). A key given with --key can be',
    'seen by other users of this machine in its process list: prefer the variable.',
    'On a terminal a progress line shows rows (bytes only for parquet), bytes and rate; piped, only a summary line is printed.',
    'An export the server cut short (an error after the first byte) exits 1 and says the file is incomplete;',
    'one stopped by QUERYAPIGATE_STREAM_MAX_ROWS is complete but says it was truncated.',
  ],
  args: { min: 1, max: 1 },
  options: {
    format: { type: 'string', value: 'csv|tsv|ndjson|parquet', help: 'the file format (default: from the file name, else csv)' },
    out: { type: 'string', value: 'FILE', help: 'where to write (default: stdout)' },
    param: { type: 'string', multiple: true, value: 'NAME=VALUE', help: "one of the query's parameters" },
    url: URL_OPTION,
    key: KEY_OPTION,
  },
  examples: [
    'queryapigate export example_all_rentals --out rentals.csv',
    'queryapigate export example_rentals_since --param since=2024-01-01 --format ndjson --out recent.ndjson --url http://gw:5000',
  ],
  async run(inv) {
    const out = inv.values.out as string | undefined;
    const fromName = out ? FORMATS.find((f) => out.endsWith(`.${f}`)) : undefined;
    const format = (inv.values.format as string | undefined) ?? fromName ?? 'csv';
    if (!FORMATS.includes(format)) throw new UsageError(`--format takes csv, tsv, ndjson or parquet: got '${format}'`, 'queryapigate export');
    const args = new URLSearchParams({ stream: 'true', format });
    for (const p of (inv.values.param as string[] | undefined) ?? []) {
      const at = p.indexOf('=');
      if (at <= 0) throw new UsageError(`--param takes NAME=VALUE: got '${p}'`, 'queryapigate export');
      args.append(p.slice(0, at), p.slice(at + 1));
    }
    const config = commandConfig(inv.say);
    const { base, key } = serverTarget(config, inv.values);
    const target = `${base}/q/${encodeURIComponent(inv.args[0])}?${args}`;
    inv.say(`server: ${base} (GET /q/${inv.args[0]}, ${format}, streamed)${key ? '' : '; no key: neither --key nor QUERYAPIGATE_API_KEY is set'}`);

    let res: Response;
    try {
      res = await fetch(target, { headers: key ? { 'X-API-Key': key } : {} });
    } catch (e) {
      throw unreachable(base, e);
    }
    if (res.status !== 200 || !res.body) throw await refused(res);

    const parquet = format === 'parquet';
    const counter = new RecordCounter(format !== 'ndjson', parquet);
    const started = performance.now();
    // A terminal gets one line redrawn in place (\r, then erase to the end of the line); a pipe gets none.
    const draw = (text: string) => process.stderr.write(`\r\x1b[K${text}`);
    const progress = process.stderr.isTTY ? setInterval(() => draw(line()), PROGRESS_EVERY_MS) : null;
    const rows = () => {
      const truncated = /(?:\{"truncated":true,"rows":\d+\}|# truncated after \d+ rows)\r?\n$/.test(counter.tail) ? 1 : 0;
      return Math.max(0, counter.records - (format === 'ndjson' ? 0 : 1) - truncated);
    };
    const line = () => {
      const s = Math.max(0.001, (performance.now() - started) / 1000);
      const rate = `${humanBytes(counter.bytes)}, ${humanBytes(Math.round(counter.bytes / s))}/s`;
      return parquet ? rate : `${rows().toLocaleString('en-US')} rows, ${rate}`;
    };
    try {
      await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), counter, out ? createWriteStream(out) : process.stdout);
    } catch (e) {
      throw new Failure(`the export was cut short after ${humanBytes(counter.bytes)} (${(e as Error).message}); ${out ?? 'the output'} is incomplete`);
    } finally {
      if (progress) {
        clearInterval(progress);
        draw('');
      }
    }
    // A whole Parquet file ends with its footer's magic; a text export with a newline.
    if (counter.bytes && !counter.tail.endsWith(parquet ? 'PAR1' : '\n')) {
      throw new Failure(
        `the server stopped mid-export after ${humanBytes(counter.bytes)} (an error after the first byte); ${out ?? 'the output'} is incomplete`,
      );
    }
    // Parquet says it in its footer's key-value metadata (queryapigate.truncated: 'after N rows').
    const truncated =
      /truncated(?:":true,"rows":| after )(\d+)/.exec(counter.tail) ?? (parquet ? /queryapigate\.truncated.{0,8}after (\d+) rows/s.exec(counter.tail) : null);
    inv.say(`wrote ${line()} to ${out ?? 'stdout'}${truncated ? ` (truncated by the server after ${truncated[1]} rows: QUERYAPIGATE_STREAM_MAX_ROWS)` : ''}`);
  },
};
