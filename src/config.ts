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
  /** An administrator token (qagadm_...) the command line calls a running server with, before the admin key. */
  readonly adminToken: string | null;
  /** Audit entries kept, the newest; older ones are pruned (the chain keeps the last pruned hash). */
  readonly auditLogLimit: number;
  readonly allowWrites: boolean;
  /** Seconds; 0 = no limit. */
  readonly queryTimeout: number;
  /** Seconds a new connection to a data source or to a PostgreSQL store may take to be ready. */
  readonly connectTimeout: number;
  readonly maxPageSize: number;
  readonly poolSize: number;
  /** PostgreSQL: calls arriving together that may share one connection (1: each takes the least busy). */
  readonly poolPipeline: number;
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
  /** Largest answer body (UTF-8 bytes) a call renders; ?stream=true exports are not limited by it. */
  readonly maxAnswerBytes: number;
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
  /** Seconds an answer (a stream, or a page too large for the socket's buffer) waits while its reader takes nothing; 0 waits forever. */
  readonly stallTimeout: number;
  /** Seconds every run stays in the event log, at least. */
  readonly eventRetention: number;
  /** Open /events streams at most; 0 turns /events off. */
  readonly eventsMaxStreams: number;
  /** Ad-hoc runs kept in history, all callers together. */
  readonly historyAdhocLimit: number;
  /** How history keeps an ad-hoc statement: its text (first 4,000 characters), its SHA-256, or nothing. */
  readonly historyAdhocSql: 'text' | 'hash' | 'none';
  /** Rows an MCP tool call answers at most (the rest is said to be truncated). */
  readonly mcpMaxRows: number;
  /** The least severe log lines written. */
  readonly logLevel: LogLevel;
  /** JSON log lines (time, level, logger, request_id, key, message, extras) instead of readable ones. */
  readonly jsonLogs: boolean;
  /** Linux: the server's threads under SCHED_BATCH (src/scheduling.ts). */
  readonly batchScheduling: boolean;
  /** Seconds after which a /q/ call's access line is a WARNING; 0 = never. */
  readonly slowQueryThreshold: number;
  /** HMAC secret signed-in users' tokens are verified with (JWT on). */
  readonly jwtSecret: string | null;
  /** A JWKS URL signed-in users' tokens are verified against (JWT on). */
  readonly jwtJwksUrl: string | null;
  /** The `iss` a token must carry. */
  readonly jwtIssuer: string | null;
  /** The `aud` values a token may carry (one is needed). */
  readonly jwtAudience: string[] | null;
  /** Accepted signing algorithms; null: RS256 with a JWKS, HS256 with a secret. */
  readonly jwtAlgorithms: string[] | null;
  /** The key role every signed-in user gets (after one named by jwtRoleClaim). */
  readonly jwtRole: string | null;
  /** The claim (a dotted path) naming a signed-in user's key role. */
  readonly jwtRoleClaim: string | null;
  /** The claim naming the user: the caller is `jwt:<value>`. */
  readonly jwtUserClaim: string;
  /** Origins browsers may call /q/ and /execute_sql from (lower case, no trailing /), or ['*']; null: CORS off. */
  readonly corsOrigins: string[] | null;
  /** Seconds between this process's heartbeats into the store; an instance unseen for 3 beats is gone. */
  readonly instancesHeartbeat: number;
  /** Percent of a query's recent runs that fail before GET /api/v1/alerts warns (query_errors); 0 = off. */
  readonly alertErrorRate: number;
  /** Days without a call after which a key is reported unused (key_unused); 0 = off. */
  readonly alertKeyUnusedDays: number;
}

/** A setting as loadConfig read it: its value, and the text it was given (null: its default). */
export interface SettingRead {
  value: unknown;
  given: string | null;
}

/** Kept beside each config loadConfig made (not in it: a config is compared, cloned and logged as it is). */
const READS = new WeakMap<Config, Readonly<Record<string, SettingRead>>>();

/** How each setting of `config` was read, for GET /api/v1/settings; empty for a config loadConfig did not make. */
export function settingsRead(config: Config): Readonly<Record<string, SettingRead>> {
  return READS.get(config) ?? {};
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
const list = v.pipe(
  text,
  v.transform((s) =>
    s
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  ),
  v.minLength(1, 'must name at least one'),
);
const HMAC_ALGORITHMS = ['HS256', 'HS384', 'HS512'];
const KEY_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
const algorithms = v.pipe(
  list,
  v.check(
    (a) => a.every((x) => HMAC_ALGORITHMS.includes(x) || KEY_ALGORITHMS.includes(x)),
    `must be among ${[...HMAC_ALGORITHMS, ...KEY_ALGORITHMS].join(', ')} (never none)`,
  ),
  v.check(
    (a) => a.every((x) => HMAC_ALGORITHMS.includes(x)) || a.every((x) => KEY_ALGORITHMS.includes(x)),
    'must not mix HMAC (HS*) and public-key algorithms',
  ),
);
/** https, or http to a loopback address (a JWKS served on the same machine, as tests do). */
const jwksUrl = v.pipe(
  text,
  v.check((s) => {
    try {
      const u = new URL(s);
      return u.protocol === 'https:' || (u.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname));
    } catch {
      return false;
    }
  }, 'must be an https:// URL (http:// only to localhost)'),
);
/** Origins compared as browsers send them: scheme://host[:port], case-insensitive, no trailing slash. */
const origins = v.pipe(
  list,
  v.transform((a) => a.map((o) => o.toLowerCase().replace(/\/+$/, ''))),
  v.check((a) => a.every((o) => o === '*' || /^https?:\/\/[^/\s]+$/.test(o)), "must be '*' or origins such as https://app.example.com"),
);
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
  ADMIN_TOKEN: [v.pipe(text, v.startsWith('qagadm_', 'must be an administrator token (qagadm_...)')), null],
  AUDIT_LOG_LIMIT: [int(1, 10_000_000), '500'],
  ALLOW_WRITES: [flag, '0'],
  QUERY_TIMEOUT: [num(0, 86400), '30'],
  CONNECT_TIMEOUT: [num(0.1, 600), '1'],
  MAX_PAGE_SIZE: [int(1, 1_000_000), '1000'],
  POOL_SIZE: [int(1, 1000), '8'],
  POOL_PIPELINE: [int(1, 1000), '16'],
  WORKERS: [int(0, 256), String(Math.max(1, availableParallelism() - 1))],
  TASKS_PER_WORKER: [int(1, 100_000), '64'],
  MAX_QUEUE: [int(1, 10_000_000), '4096'],
  HISTORY_LIMIT: [int(1, 1_000_000), '50'],
  HISTORY_FLUSH_INTERVAL: [num(0.01, 60), '1'],
  HISTORY_MAX_PENDING: [int(1, 10_000_000), '10000'],
  MAX_BODY_BYTES: [int(1, 1 << 30), String(1 << 20)],
  // At most 256 MiB: an answer is one string in memory, and V8's strings end near 512 M characters.
  MAX_ANSWER_BYTES: [int(1024, 1 << 28), String(1 << 26)],
  METADATA_CACHE_TTL: [num(0, 86400), '0'],
  MASK_KEY: [v.pipe(text, v.minLength(16, 'must be at least 16 characters')), null],
  RATE_LIMIT: [v.pipe(text, v.regex(/^\s*[1-9]\d*\s*\/\s*(second|minute|hour|day)s?\s*$/i, "must look like '60/minute' (N/second|minute|hour|day)")), null],
  TRUST_PROXY: [int(0, 32), '0'],
  STREAM_MAX_ROWS: [int(0, Number.MAX_SAFE_INTEGER), '0'],
  STALL_TIMEOUT: [int(0, 86_400), '60'],
  EVENT_RETENTION: [int(60, 30 * 86400), '3600'],
  EVENTS_MAX_STREAMS: [int(0, 100_000), '4'],
  REDIS_URL: [v.pipe(text, v.regex(/^(rediss?|unix):\/\//, 'must be a redis://, rediss:// or unix:// URL')), null],
  HISTORY_ADHOC_LIMIT: [int(1, 1_000_000), '1000'],
  HISTORY_ADHOC_SQL: [v.pipe(text, v.toLowerCase(), v.picklist(['text', 'hash', 'none'], 'must be text, hash or none')), 'text'],
  MCP_MAX_ROWS: [int(1, 100_000), '200'],
  LOG_LEVEL: [logLevel, 'info'],
  JSON_LOGS: [flag, '0'],
  BATCH_SCHEDULING: [flag, '1'],
  SLOW_QUERY_THRESHOLD: [num(0, 86400), '1'],
  JWT_SECRET: [
    v.pipe(
      text,
      v.check((s) => Buffer.byteLength(s, 'utf8') >= 32, 'must be at least 32 bytes'),
    ),
    null,
  ],
  JWT_JWKS_URL: [jwksUrl, null],
  JWT_ISSUER: [text, null],
  JWT_AUDIENCE: [list, null],
  JWT_ALGORITHMS: [algorithms, null],
  JWT_ROLE: [text, null],
  JWT_ROLE_CLAIM: [text, null],
  JWT_USER_CLAIM: [text, 'sub'],
  CORS_ORIGINS: [origins, null],
  INSTANCES_HEARTBEAT: [num(0.1, 300), '30'],
  ALERT_ERROR_RATE: [num(0, 100), '20'],
  ALERT_KEY_UNUSED_DAYS: [int(0, 36500), '90'],
} as const;

type Name = keyof typeof VARIABLES;

export type SettingGroup = 'server' | 'access' | 'calls' | 'history' | 'caching' | 'alerts';

/** The groups GET /api/v1/settings and docs/config.md show the settings in, in this order. */
export const SETTING_GROUPS: ReadonlyArray<{ id: SettingGroup; title: string; description: string }> = [
  { id: 'server', title: 'Server', description: 'Where the gateway listens, where its store is, and its threads.' },
  { id: 'access', title: 'Access', description: 'The admin key, writes, masks and limits per client address.' },
  { id: 'calls', title: 'Calls', description: 'Time limits, pages, pools and exports of saved-query calls.' },
  { id: 'history', title: 'History and events', description: 'Run history, the event log and /events.' },
  { id: 'caching', title: 'Caching and sharing', description: 'Cached rows, and Redis shared by instances.' },
  { id: 'alerts', title: 'Alerts and instances', description: 'What GET /api/v1/alerts reports, and how instances see each other.' },
];

/**
 * What each setting is, for GET /api/v1/settings and docs/config.md (npm run docs:config): its group,
 * the type of value it takes, one sentence for a user, and whether it is a secret (its value never
 * shown, only that it is configured); `defaultText` where the default is not one value everywhere.
 */
export const SETTING_INFO: Readonly<Record<Name, { group: SettingGroup; type: string; description: string; secret?: true; defaultText?: string }>> = {
  HOME: {
    group: 'server',
    type: 'folder',
    description: "Holds queryapigate.db (the SQLite store) and examples.db; a SQLite connection's file must be inside it.",
  },
  HOST: { group: 'server', type: 'address', description: 'The address the server listens on.' },
  PORT: { group: 'server', type: 'whole number, 0-65535', description: 'The port the server listens on; 0 picks a free one.' },
  DATABASE_URL: {
    group: 'server',
    type: 'postgres:// URL',
    description: 'A PostgreSQL store instead of the SQLite file, shared by instances.',
    secret: true,
  },
  LOAD_EXAMPLES: { group: 'server', type: 'flag', description: 'Loads the example APIs at start, idempotently.' },
  WORKERS: {
    group: 'server',
    type: 'whole number, 0-256',
    description: 'Executor threads; 0 runs calls inline in the acceptor.',
    defaultText: 'cores - 1, at least 1', // the number differs by machine
  },
  TASKS_PER_WORKER: {
    group: 'server',
    type: 'whole number, 1-100000',
    description: 'Calls one executor thread runs at once (the server runs at most QUERYAPIGATE_WORKERS times this).',
  },
  MAX_QUEUE: { group: 'server', type: 'whole number, 1-10000000', description: 'Calls waiting for an executor; beyond it 503 unavailable.' },
  LOG_LEVEL: { group: 'server', type: 'debug, info, warning, error or off', description: 'The least severe log lines written.' },
  BATCH_SCHEDULING: {
    group: 'server',
    type: 'flag',
    description:
      "Linux: the server's threads run under SCHED_BATCH (set with util-linux's chrt at start): a thread woken by another waits for the running one's time slice instead of preempting it, so hand-offs between threads cost fewer context switches (a lower p99 under load). Priority is unchanged. 0: the policy the process started with.",
  },
  JSON_LOGS: { group: 'server', type: 'flag', description: 'JSON log lines (time, level, logger, request_id, key, message, extras) instead of readable ones.' },
  SLOW_QUERY_THRESHOLD: { group: 'calls', type: 'seconds, 0-86400', description: "Seconds after which a /q/ call's access line is a WARNING; 0 never." },
  MAX_BODY_BYTES: { group: 'server', type: 'whole number, bytes', description: 'The largest request body; 413 beyond it.' },
  API_KEY: {
    group: 'access',
    type: 'text',
    description:
      'The shared admin key (an owner). Unset, the server is open until the first API key or administrator is created. Once a named owner exists it is break-glass: it still works, each use is logged and audited.',
    secret: true,
  },
  ADMIN_TOKEN: {
    group: 'access',
    type: 'qagadm_... token',
    description: 'The administrator token the command line calls a running server with (before QUERYAPIGATE_API_KEY); servers ignore it.',
    secret: true,
  },
  AUDIT_LOG_LIMIT: {
    group: 'history',
    type: 'whole number, 1-10000000',
    description: 'Audit log entries kept, the newest; the hash of the last one pruned anchors the chain.',
  },
  ALLOW_WRITES: { group: 'access', type: 'flag', description: 'The server-wide ceiling for writes: without it no key may write.' },
  MASK_KEY: {
    group: 'access',
    type: 'text, 16 characters or more',
    description: 'HMAC key for hash masks (default: a random secret kept in the store).',
    secret: true,
  },
  RATE_LIMIT: { group: 'access', type: 'N/second|minute|hour|day', description: 'Calls per client address, checked before authentication.' },
  JWT_SECRET: {
    group: 'access',
    type: 'text, 32 bytes or more',
    description: 'Turns on signed-in users: Authorization: Bearer tokens signed with this HMAC secret (HS256 by default). Open mode never applies with it.',
    secret: true,
  },
  JWT_JWKS_URL: {
    group: 'access',
    type: 'https:// URL',
    description:
      'Turns on signed-in users: tokens verified with the keys of this JWKS (RS256 by default; fetched again for a new key id). Needs JWT_ISSUER and JWT_AUDIENCE.',
  },
  JWT_ISSUER: { group: 'access', type: 'text', description: 'The iss a token must carry.' },
  JWT_AUDIENCE: { group: 'access', type: 'comma-separated list', description: 'The aud values accepted; a token must carry one.' },
  JWT_ALGORITHMS: {
    group: 'access',
    type: 'comma-separated list',
    description: 'Accepted signing algorithms; HMAC (HS*) and public-key ones cannot be mixed, none is never accepted.',
    defaultText: 'RS256 with a JWKS, HS256 with a secret',
  },
  JWT_ROLE: {
    group: 'access',
    type: 'key role name',
    description: 'The key role whose grants every signed-in user gets (read live), when JWT_ROLE_CLAIM names none that exists.',
  },
  JWT_ROLE_CLAIM: {
    group: 'access',
    type: 'claim (dotted path)',
    description: "The claim naming a signed-in user's key role (a name or a list: the first that exists).",
  },
  JWT_USER_CLAIM: { group: 'access', type: 'claim', description: 'The claim naming the user; the caller is jwt:<value> in history and logs.' },
  CORS_ORIGINS: {
    group: 'access',
    type: 'comma-separated origins, or *',
    description: 'Origins browsers may call /q/ and /execute_sql from: preflights answered, Access-Control-* headers on answers, never credentials.',
  },
  TRUST_PROXY: { group: 'access', type: 'whole number, 0-32', description: 'Trusted X-Forwarded-For hops in front of the server.' },
  QUERY_TIMEOUT: { group: 'calls', type: 'seconds, 0-86400', description: 'Time limit per statement; 0 disables it; a request may lower it.' },
  CONNECT_TIMEOUT: {
    group: 'calls',
    type: 'seconds, 0.1-600',
    description: 'How long a new connection to a data source or a PostgreSQL store may take; a data source slower than that is taken as down.',
  },
  MAX_PAGE_SIZE: { group: 'calls', type: 'whole number, 1-1000000', description: 'The largest page_size a call may ask for.' },
  MAX_ANSWER_BYTES: {
    group: 'calls',
    type: 'whole number, bytes, 1024-268435456',
    description: 'The largest answer a call renders (64 MiB by default); beyond it 400 answer_too_large. Streams are not limited by it.',
  },
  MCP_MAX_ROWS: { group: 'calls', type: 'whole number, 1-100000', description: 'Rows an MCP tool call answers at most; the result says when more were cut.' },
  POOL_SIZE: { group: 'calls', type: 'whole number, 1-1000', description: 'Connections per data source per executor thread.' },
  POOL_PIPELINE: {
    group: 'calls',
    type: 'whole number, 1-1000',
    description:
      'PostgreSQL, and reads on MySQL/MariaDB: calls arriving together that share one connection, sent in one write (fewer system calls and database wake-ups); a slow one delays the others. 1: each call takes a connection of its own (the least busy on PostgreSQL).',
  },
  STREAM_MAX_ROWS: { group: 'calls', type: 'whole number', description: 'Rows after which a ?stream=true export ends, marked truncated; 0 is unbounded.' },
  STALL_TIMEOUT: {
    group: 'calls',
    type: 'seconds, 0-86400',
    description:
      'Seconds an answer waits while its reader takes nothing, then the connection is cut (a ?stream=true export stops too: its statement cancelled, its connection freed); 0 waits forever.',
  },
  HISTORY_LIMIT: { group: 'history', type: 'whole number, 1-1000000', description: 'Runs kept per saved-query version.' },
  HISTORY_ADHOC_LIMIT: {
    group: 'history',
    type: 'whole number, 1-1000000',
    description: 'Runs of ad-hoc SQL (POST /execute_sql, MCP execute_sql) kept, the newest.',
  },
  HISTORY_ADHOC_SQL: { group: 'history', type: 'text, hash or none', description: 'What an ad-hoc run keeps of its SQL: the text, its SHA-256, or nothing.' },
  HISTORY_FLUSH_INTERVAL: { group: 'history', type: 'seconds, 0.01-60', description: 'Seconds between batched history writes.' },
  HISTORY_MAX_PENDING: {
    group: 'history',
    type: 'whole number, 1-10000000',
    description: 'Runs held for the recorder (also while the store is unavailable) before new ones are dropped and counted.',
  },
  EVENT_RETENTION: { group: 'history', type: 'seconds, 60-2592000', description: 'How long every run stays in the event log, at least.' },
  EVENTS_MAX_STREAMS: { group: 'history', type: 'whole number, 0-100000', description: 'Open /events streams at most; 0 turns /events off.' },
  METADATA_CACHE_TTL: { group: 'caching', type: 'seconds, 0-86400', description: 'Seconds executors keep key, query and connection rows; 0 is off.' },
  REDIS_URL: {
    group: 'caching',
    type: 'redis://, rediss:// or unix:// URL',
    description: 'Shared rate limits, response cache and change notices across instances.',
    secret: true,
  },
  INSTANCES_HEARTBEAT: {
    group: 'alerts',
    type: 'seconds, 0.1-300',
    description: 'How often each process notes itself in the store (GET /api/v1/instances); one unseen for three beats (90 s by default) is no longer listed.',
  },
  ALERT_ERROR_RATE: {
    group: 'alerts',
    type: 'percent, 0-100',
    description: 'query_errors: a query whose last 50 runs in 7 days (at least 10) failed this often or more; 0 turns the check off.',
  },
  ALERT_KEY_UNUSED_DAYS: {
    group: 'alerts',
    type: 'days, 0-36500',
    description: 'key_unused: an active key not used (or, never used, made) this many days ago; 0 turns the check off.',
  },
};

/** Every setting, in the table's order: its variable, default (as text; null: unset) and what it is. */
export function settingList() {
  return (Object.keys(VARIABLES) as Name[]).map((name) => ({
    name,
    env: `${PREFIX}${name}`,
    default: VARIABLES[name][1] as string | null,
    ...SETTING_INFO[name],
  }));
}
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
  const settings: Record<string, SettingRead> = {};
  const read = <N extends Name>(name: N): Value<N> => {
    const [schema, fallback] = VARIABLES[name];
    const raw = env[`QUERYAPIGATE_${name}`];
    const given = raw === undefined || raw === '' ? null : raw;
    const value = given ?? fallback;
    settings[name] = { value: null, given };
    if (value === null) return null as Value<N>; // only variables whose default is null get here
    const parsed = v.safeParse(schema as v.GenericSchema<string, unknown>, value);
    settings[name].value = parsed.output;
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
    adminToken: read('ADMIN_TOKEN'),
    auditLogLimit: read('AUDIT_LOG_LIMIT'),
    allowWrites: read('ALLOW_WRITES'),
    queryTimeout: read('QUERY_TIMEOUT'),
    connectTimeout: read('CONNECT_TIMEOUT'),
    maxPageSize: read('MAX_PAGE_SIZE'),
    poolSize: read('POOL_SIZE'),
    poolPipeline: read('POOL_PIPELINE'),
    workers: read('WORKERS'),
    tasksPerWorker: read('TASKS_PER_WORKER'),
    maxQueue: read('MAX_QUEUE'),
    historyLimit: read('HISTORY_LIMIT'),
    historyFlushInterval: read('HISTORY_FLUSH_INTERVAL'),
    historyMaxPending: read('HISTORY_MAX_PENDING'),
    maxBodyBytes: read('MAX_BODY_BYTES'),
    maxAnswerBytes: read('MAX_ANSWER_BYTES'),
    metadataCacheTtl: read('METADATA_CACHE_TTL'),
    redisUrl: read('REDIS_URL'),
    maskKey: read('MASK_KEY'),
    rateLimit: read('RATE_LIMIT'),
    trustProxy: read('TRUST_PROXY'),
    streamMaxRows: read('STREAM_MAX_ROWS'),
    stallTimeout: read('STALL_TIMEOUT'),
    eventRetention: read('EVENT_RETENTION'),
    eventsMaxStreams: read('EVENTS_MAX_STREAMS'),
    historyAdhocLimit: read('HISTORY_ADHOC_LIMIT'),
    historyAdhocSql: read('HISTORY_ADHOC_SQL'),
    mcpMaxRows: read('MCP_MAX_ROWS'),
    logLevel: read('LOG_LEVEL'),
    jsonLogs: read('JSON_LOGS'),
    batchScheduling: read('BATCH_SCHEDULING'),
    slowQueryThreshold: read('SLOW_QUERY_THRESHOLD'),
    jwtSecret: read('JWT_SECRET'),
    jwtJwksUrl: read('JWT_JWKS_URL'),
    jwtIssuer: read('JWT_ISSUER'),
    jwtAudience: read('JWT_AUDIENCE'),
    jwtAlgorithms: read('JWT_ALGORITHMS'),
    jwtRole: read('JWT_ROLE'),
    jwtRoleClaim: read('JWT_ROLE_CLAIM'),
    jwtUserClaim: read('JWT_USER_CLAIM'),
    corsOrigins: read('CORS_ORIGINS'),
    instancesHeartbeat: read('INSTANCES_HEARTBEAT'),
    alertErrorRate: read('ALERT_ERROR_RATE'),
    alertKeyUnusedDays: read('ALERT_KEY_UNUSED_DAYS'),
  };
  problems.push(...jwtProblems(config));
  settings.HOME.value = config.home; // as used: resolved to an absolute folder
  if (problems.length) throw new ConfigError(problems);
  Object.freeze(config);
  READS.set(config, settings);
  return config;
}

/** What the JWT settings must hold together (each is also checked alone). */
function jwtProblems(c: Config): string[] {
  const out: string[] = [];
  if (c.jwtSecret && c.jwtJwksUrl) out.push('QUERYAPIGATE_JWT_SECRET and QUERYAPIGATE_JWT_JWKS_URL: set one, not both');
  if (c.jwtJwksUrl && (!c.jwtIssuer || !c.jwtAudience)) out.push('QUERYAPIGATE_JWT_JWKS_URL needs QUERYAPIGATE_JWT_ISSUER and QUERYAPIGATE_JWT_AUDIENCE');
  if (!c.jwtSecret && !c.jwtJwksUrl) return out;
  const hmac = c.jwtAlgorithms?.every((a) => HMAC_ALGORITHMS.includes(a)) ?? !c.jwtJwksUrl;
  if (c.jwtSecret && !hmac) out.push('QUERYAPIGATE_JWT_ALGORITHMS: a QUERYAPIGATE_JWT_SECRET signs with HMAC (HS256, HS384, HS512) only');
  if (c.jwtJwksUrl && hmac) out.push('QUERYAPIGATE_JWT_ALGORITHMS: a JWKS holds public keys; HMAC algorithms need QUERYAPIGATE_JWT_SECRET');
  if (!c.jwtRole && !c.jwtRoleClaim)
    out.push('JWT is on: set QUERYAPIGATE_JWT_ROLE or QUERYAPIGATE_JWT_ROLE_CLAIM, which names the key role of a signed-in user');
  return out;
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
