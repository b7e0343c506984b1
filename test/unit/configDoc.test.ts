// docs/config.md is generated from config.ts's table (npm run docs:config): the committed page must be
// what the generator writes now, and name every setting the server reads.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { CONFIG_DOC, configReference } from '../../scripts/docsConfig.js';
import { loadConfig, settingList, settingsRead } from '../../src/config.js';

test('docs/config.md is up to date with config.ts (run npm run docs:config)', () => {
  assert.equal(readFileSync(CONFIG_DOC, 'utf8'), configReference(), 'docs/config.md is out of date: run npm run docs:config and commit it');
});

test('the reference lists every setting the server reads, each with a type and a description', () => {
  const page = configReference();
  const read = Object.keys(settingsRead(loadConfig({}, () => undefined)));
  assert.deepEqual(
    settingList()
      .map((s) => s.name)
      .sort(),
    read.sort(),
  );
  for (const s of settingList()) {
    assert.ok(page.includes(`| \`${s.env}\` | ${s.type.replaceAll('|', '\\|')} |`), s.env);
    assert.ok(s.description.length > 10, s.env);
  }
});
