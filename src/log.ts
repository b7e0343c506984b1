// In charge of the log lines every thread writes: pino, one root logger per thread, configured
// once from QUERYAPIGATE_LOG_LEVEL and QUERYAPIGATE_JSON_LOGS; `logger(name)` gives the named child
// a module logs through. JSON lines carry time, level, logger, request_id, key, message and extras
// (the contract's fields); otherwise each line is readable text. Never pass a secret in a field.
// Imports only the ground floor (the settings' type).
import { isMainThread } from 'node:worker_threads';
import pino, { type Logger } from 'pino';
import type { Config, LogLevel } from './config.js';

export type { Logger };
export type LogSettings = Pick<Config, 'logLevel' | 'jsonLogs'>;

/** Our level names (the contract's) as pino's, and pino's labels as the names lines show. */
const PINO_LEVEL: Record<LogLevel, pino.LevelWithSilent> = { debug: 'debug', info: 'info', warning: 'warn', error: 'error', off: 'silent' };
const SHOWN: Record<string, string> = { trace: 'DEBUG', debug: 'DEBUG', info: 'INFO', warn: 'WARNING', error: 'ERROR', fatal: 'ERROR' };

/**
 * The acceptor's lines are gathered here and handed to sonic-boom a chunk at a time: once about this
 * many bytes are held, every FLUSH_MS, and at exit. sonic-boom appends each write to its last buffer
 * after measuring it (Buffer.byteLength of the whole buffer, per line) and starts an fs.write on the
 * thread pool every minLength bytes; a chunk per 32 KiB makes both once per ~250 access lines.
 */
const CHUNK = 32 << 10;
const FLUSH_MS = 250;
/** Bytes held while the output does not take them (a stuck pipe) before lines are dropped. */
const MAX_LENGTH = 16 << 20;

/**
 * A destination that hands `out` its lines a chunk at a time (see CHUNK), each line encoded into the chunk as it
 * comes: a line held as a string until its chunk was full (about 12 ms under load) outlived V8's young generation,
 * and the access lines were then 40% of what each scavenge copied (bench/results/threads-2026-12-04-loglines).
 */
function chunked(out: (chunk: Buffer) => void): pino.DestinationStream {
  let chunk = Buffer.allocUnsafe(CHUNK);
  let at = 0;
  const handOver = () => {
    if (at === 0) return;
    const full = chunk.subarray(0, at);
    chunk = Buffer.allocUnsafe(CHUNK);
    at = 0;
    out(full);
  };
  setInterval(handOver, FLUSH_MS).unref();
  // Registered before pino's own exit hook flushes sonic-boom (see configureLogs), so it runs first.
  process.on('exit', handOver);
  return {
    write(line: string) {
      // A UTF-8 byte is at most 3 per UTF-16 unit: hand over the chunk before a line could overflow it.
      if (chunk.length - at < line.length * 3) {
        handOver();
        if (chunk.length < line.length * 3) chunk = Buffer.allocUnsafe(line.length * 3);
      }
      at += chunk.write(line, at);
    },
  };
}

/** The fields every JSON line has, null on a line that is not about a request. */
const NO_REQUEST = Object.freeze({ request_id: null, key: null });

/** A server's lines go to stdout, in every thread; a command's go to stderr (its stdout is its output). */
export const SERVER_LOG_FD = 1;

let root: Logger | null = null;
const children = new Map<string, Logger>();
/** Each child's name, for readable lines (pino keeps its bindings as JSON text). */
const names = new WeakMap<object, string>();
/** One destination per file descriptor, kept across configureLogs calls (an in-process test server's restart). */
const destinations = new Map<number, pino.DestinationStream>();
/** Lines the acceptor's output gave up because it held MAX_LENGTH bytes the output had not taken. */
let dropped = 0;

/** Lines this thread's output dropped (queryapigate_log_lines_dropped_total). */
export function droppedLogLines(): number {
  return dropped;
}

/** The lines in a chunk sonic-boom dropped: each ends in a newline. */
function countLines(chunk: Buffer): number {
  let n = 0;
  for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) n++;
  return n;
}

/**
 * Builds this thread's root logger, writing to `fd` (1 for a server, 2 by default, so a command's
 * stdout stays its output). The acceptor writes through sonic-boom asynchronously, a chunk at a time
 * (chunked(): the access line must not cost a syscall per call); other threads log rarely and
 * write synchronously, so nothing is lost when piscina terminates them.
 */
export function configureLogs(settings: LogSettings, fd = 2): void {
  let dest = destinations.get(fd);
  if (!dest) {
    if (isMainThread) {
      // chunked() first: its exit hook must hand its lines over before pino's flushes sonic-boom.
      let sonic: ReturnType<typeof pino.destination> | null = null;
      const lines = chunked((chunk) => sonic!.write(chunk as unknown as string)); // sonic-boom in buffer mode takes Buffers
      sonic = pino.destination({ dest: fd, sync: false, maxWrite: 2 * CHUNK, maxLength: MAX_LENGTH, contentMode: 'buffer' });
      sonic.on('drop', (chunk: Buffer) => {
        dropped += countLines(chunk);
      });
      dest = lines;
    } else dest = pino.destination({ dest: fd, sync: true });
    destinations.set(fd, dest);
  }
  root = pino(
    {
      level: PINO_LEVEL[settings.logLevel],
      base: null,
      messageKey: 'message',
      timestamp: () => `,"time":"${isoNow()}"`,
      formatters: { level: (label) => ({ level: SHOWN[label] ?? label }) },
      // A line about a request passes both fields itself (the access line, a reused object, is not copied).
      mixin: () => NO_REQUEST,
      mixinMergeStrategy: (fields, none) => ('request_id' in fields ? fields : { ...none, ...fields }),
      // Readable lines are written from the call's own arguments: pino filters the levels, and no JSON is
      // made only to be parsed back (that round trip doubled the access line's cost).
      hooks: settings.jsonLogs ? {} : { logMethod: textLines(dest) },
    },
    dest,
  );
  children.clear();
}

/** The child logger for a part of the gateway ("access", "store", "recorder", ...). */
export function logger(name: string): Logger {
  let child = children.get(name);
  if (!child) {
    root ??= defaultRoot();
    child = root.child({ logger: name });
    children.set(name, child); // one per module name: a handful
    names.set(child, name);
  }
  return child;
}

/** Before configureLogs (a command that is not the server): readable lines at info on stderr. */
function defaultRoot(): Logger {
  configureLogs({ logLevel: 'info', jsonLogs: false });
  return root!;
}

/**
 * The time of a line as ISO 8601 in UTC. Only the milliseconds are written at each line: the rest is made once a
 * second (toISOString about 0.45 µs, the append about 0.02; at one caller every line has a millisecond of its own).
 */
let second = -1;
let secondIso = '';
export function isoNow(ms = Date.now()): string {
  const s = Math.floor(ms / 1000);
  if (s !== second) {
    second = s;
    secondIso = new Date(s * 1000).toISOString().slice(0, -4); // 2026-12-01T10:00:00. (without 000Z)
  }
  const milli = ms - s * 1000;
  return `${secondIso}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
}

const LEVEL_NAME: Record<number, string> = { 10: 'DEBUG', 20: 'DEBUG', 30: 'INFO', 40: 'WARNING', 50: 'ERROR', 60: 'ERROR' };
/** The fields a readable line shows in its head rather than as key=value. */
const HEAD = new Set(['request_id', 'key', 'err']);
const BARE = /^[\w.:/@+-]+$/;

/**
 * pino's logMethod hook for readable lines, called only for enabled levels with a call's arguments
 * ([message], [fields, message] or [error, message]):
 * `2026-12-01T10:00:00.000Z INFO access [9f2c41d07a1b example-partner] request method=GET status=200`.
 */
function textLines(dest: pino.DestinationStream) {
  return function (this: Logger, args: unknown[], _method: unknown, level: number): void {
    const first = args[0];
    const fields = typeof first === 'object' && first !== null ? (first as Record<string, unknown>) : null;
    const message = fields ? args[1] : first;
    const err = first instanceof Error ? first : (fields?.err as Error | undefined);
    let line = `${isoNow()} ${LEVEL_NAME[level] ?? level} ${names.get(this) ?? '-'}`;
    if (fields?.request_id) line += ` [${fields.request_id} ${fields.key ?? '-'}]`;
    line += ` ${message ?? err?.message ?? ''}`;
    if (fields && !(first instanceof Error)) {
      for (const k in fields) {
        const value = fields[k];
        if (value !== undefined && !HEAD.has(k)) line += ` ${k}=${shown(value)}`;
      }
    }
    if (err) line += `\n  ${err.stack ?? err.message}`;
    dest.write(`${line}\n`);
  };
}
function shown(value: unknown): string {
  if (typeof value === 'string') return BARE.test(value) ? value : JSON.stringify(value);
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
}
