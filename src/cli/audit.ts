// In charge of `queryapigate audit`: reading the audit log and verifying its hash chain in the store
// directly. `verify` recomputes every entry's hash from the chain's anchor and names the first entry
// that does not hold (exit 1), so an edit made straight in the database is found.
import { viewCommand, withLocal } from './local.js';
import { printJson, printTable } from './print.js';
import { type Command, Failure, type Group, JSON_OUTPUT } from './tree.js';

const verify: Command = {
  kind: 'command',
  name: 'verify',
  summary: "Recompute the audit log's hash chain; exit 1 naming the first entry that breaks it",
  usage: '[options]',
  description: [
    'Each entry holds sha256(previous hash + the entry as canonical JSON, RFC 8785). The chain starts at its',
    'anchor: the hash of the last entry retention pruned (QUERYAPIGATE_AUDIT_LOG_LIMIT), or zeros.',
    'An entry edited, deleted or inserted in the database breaks the chain from there on.',
  ],
  args: { min: 0, max: 0 },
  options: { json: JSON_OUTPUT },
  examples: ['queryapigate audit verify'],
  run: (inv) =>
    withLocal(inv.say, async (local) => {
      const result = await local.store.audit.verify();
      if (inv.values.json) printJson(inv.out, result);
      if (!result.ok)
        throw new Failure(`the audit log is broken at entry ${result.broken_at}: ${result.reason} (${result.entries} entries before it hold)`, 'audit_broken');
      if (!inv.values.json) inv.out(`ok: ${result.entries} entries hold, from anchor ${result.anchor_id}; head ${result.head}`);
    }),
};

const list = viewCommand({
  name: 'list',
  summary: 'Show the newest audit entries',
  usage: '[options]',
  args: { min: 0, max: 0 },
  examples: ['queryapigate audit list', 'queryapigate audit list --json | jq ".items[0]"'],
  route: () => '/api/v1/audit?limit=50',
  text: (out, { items }) =>
    printTable(
      out,
      ['ID', 'TIME', 'ACTOR', 'VIA', 'ACTION', 'TARGET'],
      // biome-ignore lint/suspicious/noExplicitAny: an entry as the management API shows it
      items.map((e: any) => [String(e.id), e.timestamp, e.actor ?? '-', e.via, e.action, e.target ?? '-']),
      'No audit entries.',
    ),
});

export const AUDIT: Group = {
  kind: 'group',
  name: 'audit',
  summary: 'Read the audit log and verify its hash chain',
  children: [list, verify],
  examples: ['queryapigate audit verify'],
};
