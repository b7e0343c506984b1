// `npm start`'s build step (scripts/ensure-build.sh), run on a copy of the script in a scratch
// project whose build only counts itself: it builds when there is no stamp, skips when nothing the
// build reads changed, and builds again after a source is edited or deleted.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

test('npm start builds once, then only when a source changed or was deleted', () => {
  const dir = mkdtempSync(join(tmpdir(), 'qag-build-'));
  try {
    mkdirSync(join(dir, 'scripts'));
    copyFileSync(join(ROOT, 'scripts/ensure-build.sh'), join(dir, 'scripts/ensure-build.sh'));
    const build = 'mkdir -p dist && echo built >> dist/builds && touch dist/.build-stamp';
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'scratch', private: true, scripts: { build } }));
    for (const d of ['src', 'workers', 'bench', 'test']) mkdirSync(join(dir, d));
    for (const f of ['src/a.ts', 'src/b.ts', 'workers/w.ts', 'tsconfig.json', 'package-lock.json']) writeFileSync(join(dir, f), '{}');
    // Everything older than the first build.
    const past = new Date(Date.now() - 100_000);
    for (const p of ['src', 'workers', 'bench', 'test', 'src/a.ts', 'src/b.ts', 'workers/w.ts', 'tsconfig.json', 'package-lock.json', 'package.json']) {
      utimesSync(join(dir, p), past, past);
    }
    const start = () => {
      const r = spawnSync('bash', [join(dir, 'scripts/ensure-build.sh')], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return r.stderr;
    };
    const builds = () => (existsSync(join(dir, 'dist/builds')) ? readFileSync(join(dir, 'dist/builds'), 'utf8').split('\n').filter(Boolean).length : 0);

    assert.match(start(), /^Building \(tsc into dist\/, about a minute on 2 cores\)\.\.\.$/m);
    assert.equal(builds(), 1);
    assert.match(start(), /dist\/ is up to date with the sources: not rebuilt/);
    assert.equal(builds(), 1, 'an up-to-date build is not rebuilt');

    const now = new Date(Date.now() + 2000);
    utimesSync(join(dir, 'src/a.ts'), now, now);
    assert.match(start(), /^Building/m);
    assert.equal(builds(), 2, 'an edited source is built');

    utimesSync(join(dir, 'src/a.ts'), past, past);
    utimesSync(join(dir, 'src'), past, past);
    assert.match(start(), /not rebuilt/);
    unlinkSync(join(dir, 'src/b.ts')); // the folder's time changes: a deleted source's output must go too
    assert.match(start(), /^Building/m);
    assert.equal(builds(), 3, 'a deleted source is noticed');

    unlinkSync(join(dir, 'dist/.build-stamp')); // a build that failed writes none
    start();
    assert.equal(builds(), 4);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the project's scripts: the build writes the stamp last, npm start checks it, npm test always builds", () => {
  const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  assert.match(scripts.build, /^rm -rf dist && tsc -p \. && npm run build:console --silent && touch dist\/\.build-stamp$/);
  assert.match(scripts.prestart, /bash scripts\/ensure-build\.sh$/);
  assert.match(scripts.pretest, /npm run build --silent/);
});
