// An oha-style load generator on top of `wrk`: fixed or random URLs (a small regex subset, like
// oha's --rand-regex-url), extra headers, an optional warm-up, and one result object with the
// throughput, latency percentiles, error counts and the server's CPU seconds.
// The percentiles are wrk's, corrected for coordinated omission as wrk does at the end of a run
// (`stats_correct`): a call slower than twice a connection's mean interval also counts the calls it held back.
//
//   node dist/bench/load.js [-z 10s] [-c 32] [-t threads] [-H 'Name: value']... [--json]
//        [--warmup 3s] [--pid <server pid>] [--timeout 5s] [--seed n]
//        [--rand-regex-url 'http://127.0.0.1:5000/q/account\?aid=[1-9][0-9]{0,6}'] [URL]
//
// Other bench scripts: `import { runLoad } from './load.js'`.
// wrk itself comes from apt: `bash scripts/wrk.sh`.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

export interface LoadOptions {
  /** Target URL. With randRegexUrl it may be omitted (the pattern's literal scheme://host:port is used). */
  url?: string;
  /** URL pattern whose path/query part is expanded per request: literals, `\x` escapes, `[a-z0-9]`
   *  classes, `{n}` / `{m,n}` / `?` quantifiers. `.` is literal (as in oha). */
  randRegexUrl?: string;
  /** Run length: '10s', '2m', '500ms' or seconds as a number (wrk rounds to whole seconds). Default 10s. */
  duration?: string | number;
  /** Open connections (the concurrent callers). Default 32. */
  connections?: number;
  /** wrk threads. Default min(connections, 2). */
  threads?: number;
  /** Extra request headers, as 'Name: value' strings or an object. */
  headers?: string[] | Record<string, string>;
  /** Unmeasured run before the measured one (same settings). Default none. */
  warmup?: string | number;
  /** Server process to charge CPU time to (utime+stime from /proc/<pid>/stat, sampled around the run). */
  pid?: number;
  /** Per-request timeout: wrk counts slower responses as timeouts. Default '5s'. */
  timeout?: string | number;
  /** Seed for the random URLs (per wrk thread: seed + thread number). Default: time-based. */
  seed?: number;
  /** Lua source of wrk's `request()` function, instead of randRegexUrl (e.g. a POST with a random
   *  body); math.random is seeded per thread as for the patterns. */
  luaRequest?: string;
  /** Server CPU seconds so far, sampled around the measured run instead of `pid` (e.g. a process tree). */
  cpuSeconds?: () => number;
  /** Told as the measured run (after the warm-up) starts and as it ends: samples of their own (bench/dbCpu.ts). */
  measured?: { start(): Promise<void>; end(): Promise<void> };
}

export interface LoadResult {
  url: string;
  callers: number;
  duration_s: number;
  requests: number;
  rps: number;
  p50_ms: number;
  p90_ms: number;
  p99_ms: number;
  max_ms: number;
  /** Responses with status >= 400 (wrk's "Non-2xx or 3xx responses"). */
  non2xx: number;
  /** Socket errors: connect + read + write + timeout. */
  errors: number;
  /** Server CPU seconds spent during the measured run; null without `pid`. */
  cpu_s: number | null;
}

export class WrkMissingError extends Error {
  constructor() {
    super('wrk is not installed: run `bash scripts/wrk.sh` (it does `apt-get install wrk`)');
    this.name = 'WrkMissingError';
  }
}

const MARK = 'QUERYAPIGATE_LOAD_JSON ';

// ---------------------------------------------------------------- URL patterns

/** One piece of a generated path: a literal string, or `min..max` characters drawn from `chars`. */
export type Part = { s: string } | { chars: string; min: number; max: number };

/** Splits a URL pattern into the literal origin (scheme://host[:port]) and the parts of its path. */
export function parseUrlPattern(pattern: string): { origin: string; parts: Part[] } {
  const atoms = parseRegex(pattern);
  // the origin must be plain literal text up to the first '/' after '://'
  let literal = '';
  let i = 0;
  for (; i < atoms.length; i++) {
    const a = atoms[i];
    if (a.min !== 1 || a.max !== 1 || a.chars.length !== 1) break;
    literal += a.chars;
  }
  const scheme = literal.indexOf('://');
  const slash = scheme < 0 ? -1 : literal.indexOf('/', scheme + 3);
  if (slash < 0) {
    throw new Error(`random URL pattern ${JSON.stringify(pattern)}: the scheme://host:port/ part must be literal`);
  }
  const parts: Part[] = [];
  const pushLiteral = (s: string): void => {
    const last = parts[parts.length - 1];
    if (last && 's' in last) last.s += s;
    else parts.push({ s });
  };
  pushLiteral(literal.slice(slash));
  for (; i < atoms.length; i++) {
    const a = atoms[i];
    if (a.chars.length === 1 && a.min === a.max) pushLiteral(a.chars.repeat(a.min));
    else parts.push({ chars: a.chars, min: a.min, max: a.max });
  }
  return { origin: literal.slice(0, slash), parts };
}

interface Atom {
  chars: string;
  min: number;
  max: number;
}

function parseRegex(pattern: string): Atom[] {
  const atoms: Atom[] = [];
  const fail = (at: number, why: string): never => {
    throw new Error(
      `random URL pattern ${JSON.stringify(pattern)}, offset ${at}: ${why} ` +
        '(supported: literals, \\x escapes, [..] classes with ranges, {n} {m,n} ? quantifiers)',
    );
  };
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i];
    if (c === '\\') {
      const e = pattern[i + 1];
      if (e === undefined) fail(i, 'dangling backslash');
      atoms.push({ chars: e === 'd' ? '0123456789' : e, min: 1, max: 1 });
      i += 2;
    } else if (c === '[') {
      const end = pattern.indexOf(']', i + 2); // a ']' right after '[' is literal
      if (end < 0) fail(i, 'unclosed [');
      const body = pattern.slice(i + 1, end);
      if (body.startsWith('^')) fail(i, 'negated classes are not supported');
      const set = new Set<string>();
      for (let j = 0; j < body.length; j++) {
        let from = body[j];
        if (from === '\\' && j + 1 < body.length) from = body[++j];
        if (body[j + 1] === '-' && j + 2 < body.length) {
          let to = body[j + 2];
          j += 2;
          if (to === '\\' && j + 1 < body.length) to = body[++j];
          const a = from.charCodeAt(0);
          const b = to.charCodeAt(0);
          if (b < a) fail(i, `bad range ${from}-${to}`);
          for (let k = a; k <= b; k++) set.add(String.fromCharCode(k));
        } else {
          set.add(from);
        }
      }
      if (set.size === 0) fail(i, 'empty class');
      atoms.push({ chars: [...set].join(''), min: 1, max: 1 });
      i = end + 1;
    } else if (c === '{' || c === '?') {
      const prev = atoms[atoms.length - 1];
      if (prev?.min !== 1 || prev.max !== 1) fail(i, 'quantifier without a single preceding atom');
      if (c === '?') {
        prev.min = 0;
        i += 1;
      } else {
        const m = /^\{(\d+)(?:,(\d+))?\}/.exec(pattern.slice(i));
        if (!m) fail(i, 'expected {n} or {m,n}');
        prev.min = Number(m![1]);
        prev.max = m![2] === undefined ? prev.min : Number(m![2]);
        if (prev.max < prev.min) fail(i, `{${prev.min},${prev.max}}: max < min`);
        i += m![0].length;
      }
    } else if ('()|*+^$'.includes(c)) {
      fail(i, `'${c}' is not supported`);
    } else {
      atoms.push({ chars: c, min: 1, max: 1 }); // includes '.', literal as in oha
      i += 1;
    }
  }
  return atoms;
}

/** Expands parts into one path with the given random source (the Lua script does the same per request). */
export function expandParts(parts: Part[], random: () => number = Math.random): string {
  let out = '';
  for (const p of parts) {
    if ('s' in p) {
      out += p.s;
      continue;
    }
    const n = p.min + Math.floor(random() * (p.max - p.min + 1));
    for (let k = 0; k < n; k++) out += p.chars[Math.floor(random() * p.chars.length)];
  }
  return out;
}

// ---------------------------------------------------------------- the Lua script

/** A Lua string literal for any bytes. */
function luaStr(s: string): string {
  let out = '"';
  for (const b of Buffer.from(s, 'utf8')) {
    out += b >= 0x20 && b < 0x7f && b !== 0x22 && b !== 0x5c ? String.fromCharCode(b) : `\\${String(b).padStart(3, '0')}`;
  }
  return `${out}"`;
}

function luaScript(headers: [string, string][], parts: Part[] | null, seed: number, request?: string): string {
  const lines: string[] = [];
  for (const [name, value] of headers) lines.push(`wrk.headers[${luaStr(name)}] = ${luaStr(value)}`);
  if (parts || request) {
    lines.push(`
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  math.randomseed(${seed} + (tid or 0) * 7919)
  for _ = 1, 10 do math.random() end
end`);
  }
  if (request) lines.push(request);
  else if (parts) {
    const items = parts.map((p) => ('s' in p ? `{ s = ${luaStr(p.s)} }` : `{ c = ${luaStr(p.chars)}, min = ${p.min}, max = ${p.max} }`));
    lines.push(`
local parts = { ${items.join(', ')} }
local random, concat = math.random, table.concat

function request()
  local buf, n = {}, 0
  for i = 1, #parts do
    local p = parts[i]
    if p.s then
      n = n + 1
      buf[n] = p.s
    else
      local reps = p.min == p.max and p.min or random(p.min, p.max)
      local cs, len = p.c, #p.c
      for _ = 1, reps do
        local k = random(len)
        n = n + 1
        buf[n] = cs:sub(k, k)
      end
    end
  end
  return wrk.format(nil, concat(buf))
end`);
  }
  lines.push(`
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(${luaStr(MARK)} ..
    '{"requests":%.0f,"duration_us":%.0f,"bytes":%.0f,"connect":%.0f,"read":%.0f,"write":%.0f,' ..
    '"timeout":%.0f,"status":%.0f,"p50_us":%.1f,"p90_us":%.1f,"p99_us":%.1f,"max_us":%.1f}\\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.timeout, e.status,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
`);
  return lines.join('\n');
}

// ---------------------------------------------------------------- running wrk

/** Seconds from '10s', '2m', '500ms', '1h' or a number of seconds. */
export function parseDuration(v: string | number): number {
  if (typeof v === 'number') return v;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(v.trim());
  if (!m) throw new Error(`bad duration ${JSON.stringify(v)} (use e.g. 10s, 2m, 500ms)`);
  const n = Number(m[1]);
  return n * ({ ms: 0.001, s: 1, m: 60, h: 3600 }[m[2] ?? 's'] as number);
}

function headerPairs(h: LoadOptions['headers']): [string, string][] {
  if (!h) return [];
  if (!Array.isArray(h)) return Object.entries(h);
  return h.map((line) => {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`bad header ${JSON.stringify(line)} (use 'Name: value')`);
    return [line.slice(0, colon).trim(), line.slice(colon + 1).trim()];
  });
}

let clockTicks: number | undefined;
function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat; with `reaped`, those
 *  of its children that exited and were waited for too (a PostgreSQL server's ended backends). */
export function processCpuSeconds(pid: number, reaped = false): number {
  return statCpuSeconds(`/proc/${pid}/stat`, reaped);
}

/** CPU seconds one thread (`tid`) of process `pid` has used so far. */
export function threadCpuSeconds(pid: number, tid: number): number {
  return statCpuSeconds(`/proc/${pid}/task/${tid}/stat`, false);
}

function statCpuSeconds(path: string, reaped: boolean): number {
  const stat = readFileSync(path, 'utf8');
  // fields after "(comm)": state is field 3, utime field 14, stime field 15, cutime 16, cstime 17
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const own = Number(f[11]) + Number(f[12]);
  return (reaped ? own + Number(f[13]) + Number(f[14]) : own) / ticksPerSecond();
}

interface WrkSummary {
  requests: number;
  duration_us: number;
  bytes: number;
  connect: number;
  read: number;
  write: number;
  timeout: number;
  status: number;
  p50_us: number;
  p90_us: number;
  p99_us: number;
  max_us: number;
}

function runWrk(args: string[]): Promise<WrkSummary> {
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('error', (e: NodeJS.ErrnoException) => reject(e.code === 'ENOENT' ? new WrkMissingError() : e));
    child.on('close', (code, signal) => {
      const line = out.split('\n').find((l) => l.startsWith(MARK));
      if (code !== 0 || !line) {
        reject(new Error(`wrk ${args.join(' ')} failed (${signal ?? `exit ${code}`}):\n${err}${out}`.trimEnd()));
        return;
      }
      resolve(JSON.parse(line.slice(MARK.length)) as WrkSummary);
    });
  });
}

const round = (n: number, digits: number): number => Number(n.toFixed(digits));

/** Runs one load test (after an optional warm-up) and summarises it. */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  let url = opts.url;
  let parts: Part[] | null = null;
  if (opts.randRegexUrl) {
    const parsed = parseUrlPattern(opts.randRegexUrl);
    parts = parsed.parts;
    url ??= `${parsed.origin}/`;
  }
  if (!url) throw new Error('no URL given');
  const connections = opts.connections ?? 32;
  const threads = opts.threads ?? Math.min(connections, 2);
  if (!(Number.isInteger(connections) && connections >= 1)) throw new Error(`bad connection count ${connections}`);
  if (!(Number.isInteger(threads) && threads >= 1 && threads <= connections)) {
    throw new Error(`bad thread count ${threads} (1..connections)`);
  }
  const seconds = (v: string | number): string => `${Math.max(1, Math.round(parseDuration(v)))}s`;
  const duration = seconds(opts.duration ?? '10s');
  const timeout = seconds(opts.timeout ?? '5s');
  const seed = opts.seed ?? Date.now() % 1_000_000_007;

  const dir = mkdtempSync(join(tmpdir(), 'qag-load-'));
  try {
    const script = join(dir, 'load.lua');
    writeFileSync(script, luaScript(headerPairs(opts.headers), parts, seed, opts.luaRequest));
    const args = (d: string): string[] => ['--latency', '-t', String(threads), '-c', String(connections), '-d', d, '--timeout', timeout, '-s', script, url!];

    if (opts.warmup !== undefined && parseDuration(opts.warmup) > 0) await runWrk(args(seconds(opts.warmup)));
    const cpuNow = opts.cpuSeconds ?? (opts.pid === undefined ? null : () => processCpuSeconds(opts.pid!));
    await opts.measured?.start();
    const cpuBefore = cpuNow?.() ?? null;
    const s = await runWrk(args(duration));
    const cpu_s = cpuBefore === null ? null : round(cpuNow!() - cpuBefore, 2);
    await opts.measured?.end();

    const duration_s = s.duration_us / 1e6;
    return {
      url: opts.randRegexUrl ?? url,
      callers: connections,
      duration_s: round(duration_s, 3),
      requests: s.requests,
      rps: round(duration_s > 0 ? s.requests / duration_s : 0, 1),
      p50_ms: round(s.p50_us / 1000, 3),
      p90_ms: round(s.p90_us / 1000, 3),
      p99_ms: round(s.p99_us / 1000, 3),
      max_ms: round(s.max_us / 1000, 3),
      non2xx: s.status,
      errors: s.connect + s.read + s.write + s.timeout,
      cpu_s,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Installs wrk with scripts/wrk.sh when it is missing (needs root or passwordless sudo). */
export function ensureWrk(): void {
  const script = fileURLToPath(new URL('../../scripts/wrk.sh', import.meta.url));
  execFileSync('bash', [script], { stdio: 'inherit' });
}

// ---------------------------------------------------------------- CLI

const USAGE = `usage: node dist/bench/load.js [-z 10s] [-c 32] [-t threads] [-H 'Name: value']... [--json]
       [--warmup 3s] [--pid <server pid>] [--timeout 5s] [--seed n]
       [--rand-regex-url 'http://127.0.0.1:5000/q/account\\?aid=[1-9][0-9]{0,6}'] [URL]`;

function intArg(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new Error(`${name}: expected an integer, got ${JSON.stringify(v)}`);
  return n;
}

async function cli(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      duration: { type: 'string', short: 'z' },
      connections: { type: 'string', short: 'c' },
      threads: { type: 'string', short: 't' },
      header: { type: 'string', short: 'H', multiple: true },
      'rand-regex-url': { type: 'string' },
      json: { type: 'boolean' },
      warmup: { type: 'string' },
      pid: { type: 'string' },
      timeout: { type: 'string' },
      seed: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  if (positionals.length > 1) throw new Error(`one URL expected, got ${positionals.length}\n${USAGE}`);
  let url: string | undefined = positionals[0];
  const pattern = values['rand-regex-url'];
  if (pattern !== undefined && url !== undefined && url !== pattern) {
    throw new Error('give either a URL or --rand-regex-url <pattern> (the pattern is the URL)');
  }
  if (pattern !== undefined) url = undefined;
  if (pattern === undefined && url === undefined) throw new Error(USAGE);

  const result = await runLoad({
    url,
    randRegexUrl: pattern,
    duration: values.duration,
    connections: intArg('-c', values.connections),
    threads: intArg('-t', values.threads),
    headers: values.header,
    warmup: values.warmup,
    pid: intArg('--pid', values.pid),
    timeout: values.timeout,
    seed: intArg('--seed', values.seed),
  });
  if (values.json) {
    console.log(JSON.stringify(result));
    return;
  }
  const r = result;
  console.log(`${r.url}
  callers ${r.callers}, ${r.duration_s}s: ${r.requests} requests, ${r.rps} req/s
  latency p50 ${r.p50_ms} ms, p90 ${r.p90_ms} ms, p99 ${r.p99_ms} ms, max ${r.max_ms} ms
  non-2xx/3xx ${r.non2xx}, socket errors ${r.errors}${r.cpu_s === null ? '' : `, server CPU ${r.cpu_s}s`}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  cli(process.argv.slice(2)).catch((e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exitCode = 1;
  });
}
