// In charge of `queryapigate admins`: named administrators made, given tokens and listed in the store
// directly, through the management API's own handlers (same checks; audited with actor and via 'cli').
// A token's secret is printed once, alone on stdout.
import { viewCommand, withLocal } from './local.js';
import { printJson, printTable } from './print.js';
import { type Command, type Group, type Invocation, JSON_OUTPUT, UsageError } from './tree.js';

/** Tokens made on the command line expire in 90 days unless told otherwise (contract 4.5). */
const DEFAULT_DAYS = 90;

/** --expires: a date, 'never', or absent (90 days from today, in the server's zone). */
function expiresAt(v: Invocation['values'], command: string): string | null {
  const given = v.expires as string | undefined;
  if (given === 'never') return null;
  if (given !== undefined) {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(given)) throw new UsageError(`--expires takes YYYY-MM-DD or 'never': got '${given}'`, command);
    return given;
  }
  const d = new Date(Date.now() + DEFAULT_DAYS * 86_400_000);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

const TOKEN_OPTIONS = {
  label: { type: 'string', value: 'TEXT', help: 'what the token is for (e.g. laptop)' },
  expires: { type: 'string', value: 'YYYY-MM-DD|never', help: `valid through the end of that day (default: ${DEFAULT_DAYS} days from today)` },
  json: JSON_OUTPUT,
} as const;

const create: Command = {
  kind: 'command',
  name: 'create',
  summary: 'Create a named administrator and print its first token (shown once)',
  usage: 'NAME [options]',
  description: [
    'Roles: owner (everything), admin (everything but administrators), developer (saved queries, reads),',
    'auditor (read-only, no SQL). Once an active owner exists, the shared QUERYAPIGATE_API_KEY is break-glass:',
    'it still works, and each use is logged and audited. The token goes alone to stdout.',
  ],
  args: { min: 1, max: 1 },
  options: {
    role: { type: 'string', value: 'ROLE', help: 'owner, admin, developer or auditor (default: developer)' },
    email: { type: 'string', value: 'ADDRESS', help: 'their email address' },
    ...TOKEN_OPTIONS,
  },
  examples: ['queryapigate admins create alice --role owner --email alice@corp.com --label laptop'],
  run: (inv) => {
    const expires = expiresAt(inv.values, 'queryapigate admins create');
    return withLocal(inv.say, async (local) => {
      const admin = await local.call('POST', '/api/v1/administrators', {
        name: inv.args[0],
        role: (inv.values.role as string | undefined) ?? 'developer',
        ...(inv.values.email ? { email: inv.values.email } : {}),
      });
      const token = await local.call('POST', `/api/v1/administrators/${encodeURIComponent(admin.name)}/tokens`, {
        label: (inv.values.label as string | undefined) ?? null,
        expires_at: expires,
      });
      if (inv.values.json) printJson(inv.out, { administrator: admin, token });
      else {
        inv.say(`created ${admin.role} '${admin.name}'; token ${token.id} (expires ${token.expires_at ?? 'never'}) is shown once:`);
        inv.out(token.secret);
      }
    });
  },
};

const token: Command = {
  kind: 'command',
  name: 'token',
  summary: 'Issue another token for an administrator and print it (shown once)',
  usage: 'NAME [options]',
  args: { min: 1, max: 1 },
  options: { ...TOKEN_OPTIONS },
  examples: ['queryapigate admins token alice --label ci --expires 2027-06-30'],
  run: (inv) => {
    const expires = expiresAt(inv.values, 'queryapigate admins token');
    return withLocal(inv.say, async (local) => {
      const t = await local.call('POST', `/api/v1/administrators/${encodeURIComponent(inv.args[0])}/tokens`, {
        label: (inv.values.label as string | undefined) ?? null,
        expires_at: expires,
      });
      if (inv.values.json) printJson(inv.out, t);
      else {
        inv.say(`token ${t.id} for '${t.admin}' (expires ${t.expires_at ?? 'never'}) is shown once:`);
        inv.out(t.secret);
      }
    });
  },
};

const list = viewCommand({
  name: 'list',
  summary: 'List the administrators (never their tokens)',
  usage: '[options]',
  args: { min: 0, max: 0 },
  examples: ['queryapigate admins list'],
  route: () => '/api/v1/administrators',
  text: (out, { items }) =>
    printTable(
      out,
      ['NAME', 'ROLE', 'STATE', 'EMAIL', 'TOKENS', 'LAST SEEN'],
      // biome-ignore lint/suspicious/noExplicitAny: an administrator as the management API shows it
      items.map((a: any) => [a.name, a.role, a.active ? 'active' : 'inactive', a.email ?? '-', String(a.tokens), a.last_seen_at ?? '-']),
      'No administrators.',
    ),
});

export const ADMINS: Group = {
  kind: 'group',
  name: 'admins',
  summary: 'Manage named administrators and their tokens in the store (create, token, list)',
  description: ['These commands open the store themselves (the same QUERYAPIGATE_* settings as serve, and ./.env); no server is needed.'],
  children: [create, token, list],
  examples: ['queryapigate admins create alice --role owner', 'queryapigate admins list'],
};
