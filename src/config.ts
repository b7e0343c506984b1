// In charge of every QUERYAPIGATE_* variable: parsed and validated once at boot, then frozen and
// trusted. A bad value stops startup with a message naming the variable; a variable it does not
// know is reported (with the closest known name) and ignored. Imports only the ground floor.
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import * as v from 'valibot';
import { closestName } from './contract/suggest.js';

export interface Config {
  readonly home: string;
  readonly host: string;
  readonly port: number;
  readonly databaseUrl: string | null;
  readonly loadExamples: boolean;
  readonly adminKey: string | null;
  readonly allowWrites: boolean;
  /** Seconds; 0 = no limit. */
  readonly queryTimeout: number;
  /** Seconds a new connection to a data source or to a PostgreSQL store may take to be ready. */
  readonly connectTimeout: number;
  readonly maxPageSize: number;
  readonly poolSize: number;
  /** Executor threads; 0 runs calls inline in the acceptor. */
  readonly workers: number;
  /** Calls one executor thread takes at once before piscina queues. */
  readonly tasksPerWorker: number;
  /** Calls waiting for an executor beyond which the gateway answers 503. */
  readonly maxQueue: number;
  readonly historyLimit: number;
  /** Seconds between batched history writes. */
  readonly historyFlushInterval: number;
  /** Runs an executor holds for the recorder before it drops and counts them. */
  readonly historyMaxPending: number;
  readonly maxBodyBytes: number;
  /** Seconds an executor keeps the key, query and connection rows it read; 0 = off. */
  readonly metadataCacheTtl: number;
  readonly redisUrl: string | null;
  /** HMAC key for masked values; by default a random per-store secret. */
  readonly maskKey: string | null;
  /** Server-wide limit per client address, e.g. "100/second"; checked before authentication. */
  readonly rateLimit: string | null;
  /** Trusted X-Forwarded-For hops in front of the server. */
  readonly trustProxy: number;
  /** Rows after which a ?stream=true export ends, marked truncated; 0 = unbounded. */
  readonly streamMaxRows: number;
  /** Seconds every run stays in the event log, at least. */
  readonly eventRetention: number;
  /** Open /events streams at most; 0 turns /events off. */
  readonly eventsMaxStreams: number;
  /** The least severe log lines written. */
  readonly logLevel: LogLevel;
  /** JSON log lines (time, level, logger, request_id, key, message, extras) instead of readable ones. */
  readonly jsonLogs: boolean;
  /** Seconds after which a /q/ call's access line is a WARNING; 0 = never. */
  readonly slowQueryThreshold: number;
}

export const LOG_LEVELS = ['debug', 'info', 'warning', 'error', 'off'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const flag = v.pipe(
  v.string(),
  v.transform((s) => s.trim().toLowerCase()),
  v.check((s) => ['1', 'true', 'yes', 'on', '0', 'false', 'no', 'off', ''].includes(s), 'must be 1/true/yes/on or 0/false/no/off'),
  v.transform((s) => ['1', 'true', 'yes', 'on'].includes(s)),
);
const int = (min: number, max: number) =>
  v.pipe(v.string(), v.trim(), v.regex(/^\d+$/, 'must be a whole number'), v.transform(Number), v.minValue(min), v.maxValue(max));
const num = (min: number, max: number) =>
  v.pipe(v.string(), v.trim(), v.regex(/^\d+(\.\d+)?$/, 'must be a number'), v.transform(Number), v.minValue(min), v.maxValue(max));
const text = v.pipe(v.string(), v.trim(), v.minLength(1, 'must not be empty'));
const logLevel = v.pipe(
  v.string(),
  v.transform((s) => s.trim().toLowerCase()),
  v.picklist(LOG_LEVELS, `must be one of ${LOG_LEVELS.join(', ')}`),
);

/** Each variable (without the QUERYAPIGATE_ prefix), its schema and its default as text. */
const VARIABLES = {
  HOME: [text, '.'],
  HOST: [text, '127.0.0.1'],
  PORT: [int(0, 65535), '5000'],
  DATABASE_URL: [v.pipe(text, v.regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')), null],
  LOAD_EXAMPLES: [flag, '0'],
  API_KEY: [text, null],
  ALLOW_WRITES: [flag, '0'],
  QUERY_TIMEOUT: [num(0, 86400), '30'],
  CONNECT_TIMEOUT: [num(0.1, 600), '1'],
  MAX_PAGE_SIZE: [int(1, 1_000_000), '1000'],
  POOL_SIZE: [int(1, 1000), '8'],
  WORKERS: [int(0, 256), String(Math.max(1, availableParallelism() - 1))],
  TASKS_PER_WORKER: [int(1, 100_000), '64'],
  MAX_QUEUE: [int(1, 10_000_000), '4096'],
  HISTORY_LIMIT: [int(1, 1_000_000), '50'],
  HISTORY_FLUSH_INTERVAL: [num(0.01, 60), '1'],
  HISTORY_MAX_PENDING: [int(1, 10_000_000), '10000'],
  MAX_BODY_BYTES: [int(1, 1 << 30), String(1 << 20)],
  METADATA_CACHE_TTL: [num(0, 86400), '0'],
  MASK_KEY: [v.pipe(text, v.minLength(16, 'must be at least 16 characters')), null],
  RATE_LIMIT: [v.pipe(text, v.regex(/^\s*[1-9]\d*\s*\/\s*(second|minute|hour|day)s?\s*$/i, "must look like '60/minute' (N/second|minute|hour|day)")), null],
  TRUST_PROXY: [int(0, 32), '0'],
  STREAM_MAX_ROWS: [int(0, Number.MAX_SAFE_INTEGER), '0'],
  EVENT_RETENTION: [int(60, 30 * 86400), '3600'],
  EVENTS_MAX_STREAMS: [int(0, 100_000), '4'],
  REDIS_URL: [v.pipe(text, v.regex(/^(rediss?|unix):\/\//, 'must be a redis://, rediss:// or unix:// URL')), null],
  LOG_LEVEL: [logLevel, 'info'],
  JSON_LOGS: [flag, '0'],
  SLOW_QUERY_THRESHOLD: [num(0, 86400), '1'],
} as const;

type Name = keyof typeof VARIABLES;
/** What a variable reads as: its schema's output, or null when it has no default and is unset. */
type Value<N extends Name> = v.InferOutput<(typeof VARIABLES)[N][0]> | ((typeof VARIABLES)[N][1] extends null ? null : never);

const PREFIX = 'QUERYAPIGATE_';
/** Variables the test suites read for themselves (QUERYAPIGATE_TEST_PG_URL, ...): not the server's, not a typo. */
const TEST_PREFIX = 'QUERYAPIGATE_TEST_';

/** One line on stderr per unknown variable; a typo must not be silently ignored, nor stop the start. */
const warnOnStderr = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

export function loadConfig(env: NodeJS.ProcessEnv = process.env, warn: (line: string) => void = warnOnStderr): Config {
  for (const line of unknownVariables(env)) warn(line);
  const problems: string[] = [];
  const read = <N extends Name>(name: N): Value<N> => {
    const [schema, fallback] = VARIABLES[name];
    const raw = env[`QUERYAPIGATE_${name}`];
    const value = raw === undefined || raw === '' ? fallback : raw;
    if (value === null) return null as Value<N>; // only variables whose default is null get here
    const parsed = v.safeParse(schema as v.GenericSchema<string, unknown>, value);
    if (parsed.success) return parsed.output as Value<N>;
    problems.push(`QUERYAPIGATE_${name}=${JSON.stringify(raw)}: ${parsed.issues[0].message}`);
    return null as Value<N>; // a placeholder: with a problem, the config below is never returned
  };
  const config: Config = {
    home: resolve(read('HOME')),
    host: read('HOST'),
    port: read('PORT'),
    databaseUrl: read('DATABASE_URL'),
    loadExamples: read('LOAD_EXAMPLES'),
    adminKey: read('API_KEY'),
    allowWrites: read('ALLOW_WRITES'),
    queryTimeout: read('QUERY_TIMEOUT'),
    connectTimeout: read('CONNECT_TIMEOUT'),
    maxPageSize: read('MAX_PAGE_SIZE'),
    poolSize: read('POOL_SIZE'),
    workers: read('WORKERS'),
    tasksPerWorker: read('TASKS_PER_WORKER'),
    maxQueue: read('MAX_QUEUE'),
    historyLimit: read('HISTORY_LIMIT'),
    historyFlushInterval: read('HISTORY_FLUSH_INTERVAL'),
    historyMaxPending: read('HISTORY_MAX_PENDING'),
    maxBodyBytes: read('MAX_BODY_BYTES'),
    metadataCacheTtl: read('METADATA_CACHE_TTL'),
    redisUrl: read('REDIS_URL'),
    maskKey: read('MASK_KEY'),
    rateLimit: read('RATE_LIMIT'),
    trustProxy: read('TRUST_PROXY'),
    streamMaxRows: read('STREAM_MAX_ROWS'),
    eventRetention: read('EVENT_RETENTION'),
    eventsMaxStreams: read('EVENTS_MAX_STREAMS'),
    logLevel: read('LOG_LEVEL'),
    jsonLogs: read('JSON_LOGS'),
    slowQueryThreshold: read('SLOW_QUERY_THRESHOLD'),
  };
  if (problems.length) throw new ConfigError(problems);
  return Object.freeze(config);
}

/** A warning per QUERYAPIGATE_* variable that is not a setting; values are never shown (one may be a secret). */
export function unknownVariables(env: NodeJS.ProcessEnv): string[] {
  const known = Object.keys(VARIABLES);
  const lines: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith(PREFIX) || name.startsWith(TEST_PREFIX) || Object.hasOwn(VARIABLES, name.slice(PREFIX.length))) continue;
    const near = closestName(name.slice(PREFIX.length), known);
    lines.push(`warning: ${name} is not a QueryAPIGate setting and is ignored${near ? `; did you mean ${PREFIX}${near}?` : ''}`);
  }
  return lines;
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  }
}
