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

/** The acceptor's buffer: written out once it holds this much, or every FLUSH_MS, or at exit. */
const MIN_LENGTH = 4096;
const FLUSH_MS = 250;
/** Bytes held while the output does not take them (a stuck pipe) before lines are dropped. */
const MAX_LENGTH = 16 << 20;

/** The fields every JSON line has, null on a line that is not about a request. */
const NO_REQUEST = Object.freeze({ request_id: null, key: null });

/** A server's lines go to stdout, in every thread; a command's go to stderr (its stdout is its output). */
export const SERVER_LOG_FD = 1;

let root: Logger | null = null;
const children = new Map<string, Logger>();
/** One destination per file descriptor, kept across configureLogs calls (an in-process test server's restart). */
const destinations = new Map<number, pino.DestinationStream>();

/**
 * Builds this thread's root logger, writing to `fd` (1 for a server, 2 by default, so a command's
 * stdout stays its output). The acceptor writes through sonic-boom asynchronously with minLength
 * buffering (the access line must not cost a syscall per call); other threads log rarely and
 * write synchronously, so nothing is lost when piscina terminates them.
 */
export function configureLogs(settings: LogSettings, fd = 2): void {
  let dest = destinations.get(fd);
  if (!dest) {
    dest = pino.destination(
      isMainThread ? { dest: fd, sync: false, minLength: MIN_LENGTH, maxLength: MAX_LENGTH, periodicFlush: FLUSH_MS } : { dest: fd, sync: true },
    );
    destinations.set(fd, dest);
  }
  root = pino(
    {
      level: PINO_LEVEL[settings.logLevel],
      base: null,
      messageKey: 'message',
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: SHOWN[label] ?? label }) },
      // A line about a request passes both fields itself (the access line, a reused object, is not copied).
      mixin: () => NO_REQUEST,
      mixinMergeStrategy: (fields, none) => ('request_id' in fields ? fields : { ...none, ...fields }),
    },
    settings.jsonLogs ? dest : textLines(dest),
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
  }
  return child;
}

/** Before configureLogs (a command that is not the server): readable lines at info on stderr. */
function defaultRoot(): Logger {
  configureLogs({ logLevel: 'info', jsonLogs: false });
  return root!;
}

/** The pino fields a text line shows in its head rather than as key=value. */
const HEAD = new Set(['time', 'level', 'logger', 'request_id', 'key', 'message', 'err']);
const BARE = /^[\w.:/@+-]+$/;

/**
 * A stream that turns pino's JSON lines into readable ones:
 * `2026-12-01T10:00:00.000Z INFO access [9f2c41d07a1b example-partner] request method=GET status=200`.
 * Parsing the line back costs about a microsecond; pino keeps level filtering and child fields.
 */
function textLines(dest: pino.DestinationStream): pino.DestinationStream {
  return {
    write(json: string) {
      const o = JSON.parse(json) as Record<string, unknown>;
      let line = `${o.time} ${o.level} ${o.logger ?? '-'}`;
      if (o.request_id) line += ` [${o.request_id} ${o.key ?? '-'}]`;
      line += ` ${o.message ?? ''}`;
      for (const k in o) if (!HEAD.has(k)) line += ` ${k}=${shown(o[k])}`;
      const err = o.err as { stack?: string; message?: string } | undefined;
      if (err) line += `\n  ${err.stack ?? err.message}`;
      dest.write(`${line}\n`);
    },
  };
}

function shown(value: unknown): string {
  if (typeof value === 'string') return BARE.test(value) ? value : JSON.stringify(value);
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
}
