// In charge of `queryapigate keys`: scoped API keys made, listed, shown, rotated and revoked in the
// store directly, through the management API's own handlers (same checks, same defaults). A secret
// is printed only by the two commands that make one (create, rotate), alone on stdout.
import { viewCommand, withLocal } from './local.js';
import { cell, printFields, printJson, printTable } from './print.js';
import { type Command, Failure, type Group, type Invocation, JSON_OUTPUT, UsageError } from './tree.js';

const REACHING_SERVERS = [
  'Running servers: on a PostgreSQL store they are told at once (NOTIFY on their change channel; Redis',
  'pub/sub instead when QUERYAPIGATE_REDIS_URL is set). A SQLite store has no such feed: a server reads',
  'key rows from the store on every call, so it sees the change at once, unless it sets',
  'QUERYAPIGATE_METADATA_CACHE_TTL=N, which lets it use a cached row for up to N seconds.',
];

const list = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);

/** 'a=b' pairs of a repeated option, split at the first '='. */
function pairs(given: string[] | undefined, option: string, shape: string): Array<[string, string]> | undefined {
  return given?.map((p) => {
    const at = p.indexOf('=');
    if (at <= 0 || at === p.length - 1) throw new UsageError(`--${option} takes ${shape}: got '${p}'`, `queryapigate keys create`);
    return [p.slice(0, at).trim(), p.slice(at + 1).trim()];
  });
}

/** The create body from the options: only what was given, so the API's defaults apply to the rest. */
function grantsFrom(v: Invocation['values']): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const str = (k: string) => v[k] as string | undefined;
  if (str('queries') !== undefined) body.queries = str('queries')!.trim() === '*' ? '*' : list(str('queries')!);
  if (str('connections') !== undefined) body.connections = str('connections')!.trim() === '*' ? '*' : list(str('connections')!);
  if (v['allow-writes']) body.allow_writes = true;
  if (str('write-ops') !== undefined) body.allowed_write_ops = list(str('write-ops')!);
  if (str('tables') !== undefined) body.allowed_tables = list(str('tables')!);
  if (str('allowed-ips') !== undefined) body.allowed_ips = list(str('allowed-ips')!);
  if (str('rate-limit') !== undefined) body.rate_limit = str('rate-limit');
  const perQuery = pairs(v['query-rate-limit'] as string[] | undefined, 'query-rate-limit', 'QUERY=N/UNIT');
  if (perQuery) body.rate_limits = Object.fromEntries(perQuery);
  const masks = pairs(v.mask as string[] | undefined, 'mask', 'COLUMN=ACTION');
  if (masks) body.mask = masks.map(([column, action]) => ({ column, action }));
  if (str('expires') !== undefined) body.expires_at = str('expires');
  if (v.inactive) body.active = false;
  return body;
}

// biome-ignore lint/suspicious/noExplicitAny: a key as the management API shows it
function keyLine(k: any): string[] {
  const state = !k.active ? 'inactive' : k.expired ? 'expired' : 'active';
  return [k.name, state, k.expires_at ?? '-', cell(k.queries), cell(k.connections), k.last_used_at ?? '-'];
}

/** The key's fields as the API names them in errors, and the options that set them. */
const OPTION_OF: Record<string, string> = {
  name: 'NAME',
  queries: '--queries',
  connections: '--connections',
  allowed_write_ops: '--write-ops',
  allowed_tables: '--tables',
  mask: '--mask',
  rate_limit: '--rate-limit',
  rate_limits: '--query-rate-limit',
  allowed_ips: '--allowed-ips',
  expires_at: '--expires',
};

/** An API error about a field ("expires_at must be a date") named by its option instead. */
function inOptionTerms(e: unknown): never {
  if (e instanceof Failure && e.code === 'invalid_body') {
    const field = /^([a-z_]+)(?=[.: ])/.exec(e.message)?.[1];
    if (field && OPTION_OF[field]) {
      const rest = e.message
        .slice(field.length)
        .replace(/^\.[^:\s]*/, '')
        .replace(/^:?\s*/, '');
      throw new Failure(`${OPTION_OF[field]}: ${rest}`, e.code);
    }
  }
  throw e;
}

const create: Command = {
  kind: 'command',
  name: 'create',
  summary: 'Create a scoped API key and print its secret (shown once)',
  usage: 'NAME [options]',
  description: [
    'The secret goes alone to stdout (only its SHA-256 is stored); what was made goes to stderr.',
    'Every grant is checked as POST /api/v1/api-keys checks it, with its defaults: without --queries the',
    "key is given no saved query by name; without --connections it may use every connection ('*'), and",
    "so call every saved query there. --connections '' (none) limits it to the queries of --queries.",
  ],
  args: { min: 1, max: 1 },
  options: {
    queries: { type: 'string', value: 'LIST', help: "saved queries it may call, comma-separated, or '*' for all" },
    connections: { type: 'string', value: 'LIST', help: "connections it may use (any query on them), comma-separated; '*' all (the default); '' none" },
    'allow-writes': { type: 'boolean', help: 'may run writes (the server also needs QUERYAPIGATE_ALLOW_WRITES=1)' },
    'write-ops': { type: 'string', value: 'LIST', help: 'the write verbs it may run, e.g. insert,update' },
    tables: { type: 'string', value: 'LIST', help: 'the only tables its statements may touch' },
    mask: { type: 'string', multiple: true, value: 'COLUMN=ACTION', help: 'mask a column: hash, mask, null or drop (e.g. customers.email=hash)' },
    'rate-limit': { type: 'string', value: 'N/UNIT', help: 'calls allowed per second, minute, hour or day (e.g. 60/minute)' },
    'query-rate-limit': { type: 'string', multiple: true, value: 'QUERY=N/UNIT', help: "a limit of its own on one saved query's calls" },
    'allowed-ips': { type: 'string', value: 'LIST', help: 'addresses or CIDRs it may call from' },
    expires: { type: 'string', value: 'YYYY-MM-DD', help: 'valid through the end of that day' },
    inactive: { type: 'boolean', help: 'create it switched off' },
    json: JSON_OUTPUT,
  },
  examples: [
    "queryapigate keys create partner --queries example_film_lookup,example_film_search --connections '' --expires 2027-12-31",
    "SECRET=$(queryapigate keys create ci --queries nightly_export --connections '')",
  ],
  run: (inv) =>
    withLocal(inv.say, async (local, config) => {
      const key = await local.call('POST', '/api/v1/api-keys', { name: inv.args[0], ...grantsFrom(inv.values) }).catch(inOptionTerms);
      if (inv.values.json) printJson(inv.out, key);
      else {
        inv.say(`created API key '${key.name}' (queries: ${cell(key.queries)}; connections: ${cell(key.connections)}); its secret is shown once:`);
        inv.out(key.secret);
      }
      if (key.connections === '*' && key.queries !== '*') {
        inv.say("note: with connections '*' this key may call every saved query; --connections '' limits it to its --queries");
      }
      if (!config.adminKey) {
        inv.say('note: no QUERYAPIGATE_API_KEY is set, and a scoped key now exists: the management API no longer answers without a key');
      }
    }),
};

const listKeys = viewCommand({
  name: 'list',
  summary: 'List the API keys (never their secrets)',
  usage: '[options]',
  args: { min: 0, max: 0 },
  examples: ['queryapigate keys list', 'queryapigate keys list --json | jq -r ".items[].name"'],
  route: () => '/api/v1/api-keys',
  text: (out, { items }) => printTable(out, ['NAME', 'STATE', 'EXPIRES', 'QUERIES', 'CONNECTIONS', 'LAST USED'], items.map(keyLine), 'No API keys.'),
});

const show = viewCommand({
  name: 'show',
  summary: "Show one API key's grants and state (never its secret)",
  usage: 'NAME [options]',
  args: { min: 1, max: 1 },
  examples: ['queryapigate keys show partner'],
  route: ([name]) => `/api/v1/api-keys/${encodeURIComponent(name)}`,
  text: printFields,
});

const rotate: Command = {
  kind: 'command',
  name: 'rotate',
  summary: 'Give an API key a new secret and print it (shown once)',
  usage: 'NAME [options]',
  description: ['The new secret goes alone to stdout. The old one stops working at once, or after --grace-seconds.', '', ...REACHING_SERVERS],
  args: { min: 1, max: 1 },
  options: {
    'grace-seconds': { type: 'string', value: 'N', help: 'the old secret keeps working for N more seconds (at most 30 days)' },
    json: JSON_OUTPUT,
  },
  examples: ['queryapigate keys rotate partner --grace-seconds 3600'],
  run: (inv) => {
    const grace = inv.values['grace-seconds'] as string | undefined;
    if (grace !== undefined && !/^\d+$/.test(grace.trim())) {
      throw new UsageError(`--grace-seconds takes a whole number of seconds: got '${grace}'`, 'queryapigate keys rotate');
    }
    return withLocal(inv.say, async (local) => {
      const body = grace === undefined ? {} : { grace_seconds: Number(grace) };
      const key = await local.call('POST', `/api/v1/api-keys/${encodeURIComponent(inv.args[0])}/rotate`, body);
      if (inv.values.json) printJson(inv.out, key);
      else {
        const old = key.previous_secret_valid_until ? `the old one works until ${key.previous_secret_valid_until}` : 'the old one no longer works';
        inv.say(`rotated API key '${key.name}': ${old}; the new secret is shown once:`);
        inv.out(key.secret);
      }
    });
  },
};

const revoke: Command = {
  kind: 'command',
  name: 'revoke',
  summary: 'Delete an API key: its secret stops working',
  usage: 'NAME',
  description: ['Deletes the key, as DELETE /api/v1/api-keys/NAME does.', '', ...REACHING_SERVERS],
  args: { min: 1, max: 1 },
  options: {},
  examples: ['queryapigate keys revoke partner'],
  run: (inv) =>
    withLocal(inv.say, async (local) => {
      await local.call('DELETE', `/api/v1/api-keys/${encodeURIComponent(inv.args[0])}`);
      inv.say(`revoked API key '${inv.args[0]}'`);
    }),
};

export const KEYS: Group = {
  kind: 'group',
  name: 'keys',
  summary: 'Manage scoped API keys in the store (create, list, show, rotate, revoke)',
  description: ['These commands open the store themselves (the same QUERYAPIGATE_* settings as serve, and ./.env); no server is needed.'],
  children: [create, listKeys, show, rotate, revoke],
  examples: ['queryapigate keys create partner --queries example_film_lookup', 'queryapigate keys list'],
};
