// The open-loop load generator (bench/openloop/openloop.c) from TypeScript: built on first use
// (bench/cBuild.ts), given a URL pattern as bench/load.ts takes them
// (`http://127.0.0.1:8080/q/account\?aid=[1-9][0-9]{0,5}`), run, and its JSON read back.
// wrk2 does the same job but is not in Debian; wrk's closed loop cannot offer a fixed rate.
//
//   node dist/bench/openloop.js --rate 1000 [-z 10] [-c 64] [-H 'Name: value']... URL-PATTERN
import { execFile } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { builtC } from './cBuild.js';
import { parseUrlPattern, type Part } from './load.js';

/** A latency histogram's summary, in microseconds. */
export interface Spread {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

/** What openloop prints. */
export interface OpenLoopResult {
  rate: number;
  duration_s: number;
  connections: number;
  /** Requests due in the window: rate x duration. */
  scheduled: number;
  sent: number;
  completed: number;
  /** Answers received before the window's end; served_rps is these over the window. */
  completed_in_window: number;
  served_rps: number;
  non2xx: number;
  errors: { connect: number; read: number; write: number; timeout: number };
  /** Due requests neither answered nor failed when the drain ended. */
  unfinished: number;
  /** The most requests that were due but waiting for a free connection at once. */
  backlog_max: number;
  wall_s: number;
  /** The generator's own CPU seconds (user + system). */
  cpu_s: number;
  /** From each request's due time: what a caller sending at the rate would see. */
  latency_us: Spread;
  /** From each request's send time (what a closed-loop tool reports), for comparison. */
  uncorrected_us: Spread;
}

export interface OpenLoopOptions {
  /** A URL pattern in bench/load.ts's subset: literals, `\x` escapes, `[..]` classes, `{n}` `{m,n}` `?`. */
  pattern: string;
  rate: number;
  durationS: number;
  connections?: number;
  headers?: Record<string, string>;
  /** Seconds after the window to wait for answers still due. Default 5. */
  drainS?: number;
  /** Seconds a sent request may wait for its answer before it fails. Default 5. */
  timeoutS?: number;
  seed?: number;
}

/** The built program (bench/cBuild.ts). */
export const openLoopBinary = (): string => builtC('openloop');

/** The program's --part arguments for a pattern's path (see openloop.c). */
export function partArgs(parts: Part[]): string[] {
  return parts.flatMap((p) => ['--part', 's' in p ? `s:${p.s}` : `c:${p.min}:${p.max}:${p.chars}`]);
}

export function runOpenLoop(o: OpenLoopOptions): Promise<OpenLoopResult> {
  const { origin, parts } = parseUrlPattern(o.pattern);
  const u = new URL(origin);
  if (u.protocol !== 'http:' || !/^\d+\.\d+\.\d+\.\d+$/.test(u.hostname)) throw new Error(`openloop: an http://<IPv4>:<port> origin expected, got ${origin}`);
  const args = [
    ...['--host', u.hostname, '--port', u.port || '80'],
    ...['--rate', String(o.rate), '--duration', String(o.durationS), '--connections', String(o.connections ?? 64)],
    ...['--drain', String(o.drainS ?? 5), '--timeout', String(o.timeoutS ?? 5), '--seed', String(o.seed ?? Date.now() % 1_000_000_007)],
    ...Object.entries(o.headers ?? {}).flatMap(([k, v]) => ['--header', `${k}: ${v}`]),
    ...partArgs(parts),
  ];
  const bin = openLoopBinary();
  return new Promise((resolve, reject) => {
    execFile(bin, args, { maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`openloop ${args.join(' ')}: ${err.message}\n${stderr}`));
      else resolve(JSON.parse(stdout) as OpenLoopResult);
    });
  });
}

async function cli(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      rate: { type: 'string' },
      duration: { type: 'string', short: 'z', default: '10' },
      connections: { type: 'string', short: 'c', default: '64' },
      header: { type: 'string', short: 'H', multiple: true },
    },
  });
  if (!values.rate || positionals.length !== 1)
    throw new Error("usage: node dist/bench/openloop.js --rate 1000 [-z 10] [-c 64] [-H 'Name: value']... URL-PATTERN");
  const headers = Object.fromEntries((values.header ?? []).map((h) => [h.slice(0, h.indexOf(':')).trim(), h.slice(h.indexOf(':') + 1).trim()]));
  const r = await runOpenLoop({
    pattern: positionals[0],
    rate: Number(values.rate),
    durationS: Number(values.duration),
    connections: Number(values.connections),
    headers,
  });
  console.log(JSON.stringify(r));
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  cli(process.argv.slice(2)).catch((e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exitCode = 1;
  });
}
