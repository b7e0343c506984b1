// Writes docs/config.md, the configuration reference, from config.ts's table of settings (their
// names, defaults, types and descriptions live only there): `npm run docs:config`. A unit test
// (test/unit/configDoc.test.ts) fails when the committed page is not what this writes.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SETTING_GROUPS, settingList } from '../src/config.js';

export const CONFIG_DOC = fileURLToPath(new URL('../../docs/config.md', import.meta.url));

const cell = (text: string) => text.replaceAll('|', '\\|');

export function configReference(): string {
  const settings = settingList();
  const lines = [
    '# Configuration reference',
    '',
    '<!-- Written by `npm run docs:config` from src/config.ts; edit the table there, not this page. -->',
    '',
    'Every setting is a `QUERYAPIGATE_*` environment variable, read once at start (and by every',
    '`queryapigate` command, after `./.env`). A bad value stops the start with a message naming the',
    'variable; an unknown `QUERYAPIGATE_*` variable is reported with the closest name and ignored. Flags',
    'take `1`, `true`, `yes` or `on` (and `0`, `false`, `no`, `off`); an empty value is the default.',
    '`GET /api/v1/settings` (admin) shows what a running server uses, and where each value came from.',
    'Secrets are never shown, only that they are configured.',
    '',
  ];
  for (const g of SETTING_GROUPS) {
    lines.push(`## ${g.title}`, '', g.description, '', '| Variable | Type | Default | Meaning |', '|---|---|---|---|');
    for (const s of settings.filter((x) => x.group === g.id)) {
      const shown = s.defaultText ?? (s.default === null ? 'unset' : `\`${s.default}\``);
      lines.push(`| \`${s.env}\` | ${cell(s.type)} | ${cell(shown)} | ${cell(s.description)}${s.secret ? ' Secret: shown only as configured.' : ''} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(CONFIG_DOC, configReference());
  process.stdout.write(`wrote ${CONFIG_DOC}\n`);
}
