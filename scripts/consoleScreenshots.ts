// `npm run docs:screenshots`: a picture of each console screen, in docs/console/*.png, taken from a
// throwaway server with the bundled examples (SQLite, so no database server is needed) and a few
// runs, in Debian's Chromium (the browser the tests use: test/browser.ts).
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBrowser } from '../test/browser.js';
import { ADMIN_KEY, request, startTestServer } from '../test/helpers.js';

const OUT = fileURLToPath(new URL('../../docs/console/', import.meta.url));

const s = await startTestServer({ QUERYAPIGATE_LOAD_EXAMPLES: '1' });
const b = await launchBrowser();
try {
  mkdirSync(OUT, { recursive: true });
  const key = await s.call('POST', '/api/v1/api-keys', {
    body: { name: 'analyst', queries: ['example_recent_rentals', 'example_film_lookup'], mask: [{ column: 'title', action: 'hash' }] },
  });
  const secret: string = key.json.secret;
  const page = await b.context.newPage();
  await page.setViewportSize({ width: 1280, height: 860 });
  const shot = async (name: string) => {
    await page.waitForTimeout(300);
    await page.screenshot({ path: join(OUT, `${name}.png`), fullPage: false });
    console.log(`docs/console/${name}.png`);
  };
  const go = (path: string) => page.goto(`${s.url}/console/#/${path}`);

  await page.goto(`${s.url}/console/`);
  await shot('sign-in');
  await page.getByLabel('Admin key or token', { exact: true }).fill(ADMIN_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  // Calls spread over a few reads of /metrics draw the charts and fill the feed.
  for (let i = 0; i < 24; i++) {
    await request(s.url, 'GET', `/q/example_film_lookup?film_id=${(i % 5) + 1}`, { key: secret });
    if (i % 4 === 3) await request(s.url, 'GET', '/q/example_film_lookup?film_id=0', { key: secret });
    await page.waitForTimeout(500);
  }
  await shot('overview');

  await go('connections');
  await page.getByRole('button', { name: /Test and browse examples/ }).click();
  await page.getByRole('button', { name: 'Test connection' }).click();
  await page.getByText(/Reachable/).waitFor();
  await page.locator('summary', { hasText: '.film' }).first().click();
  await shot('connections');

  await go('queries');
  await page.getByRole('link', { name: 'example_recent_rentals' }).waitFor();
  await shot('queries');
  await go('queries/example_recent_rentals');
  await page.locator('.sql-editor').waitFor();
  await page.getByText(/Checks pass/).waitFor();
  await shot('query-editor');
  await page.getByRole('tab', { name: 'Run' }).click();
  await page.getByLabel('Run as key', { exact: true }).fill(secret);
  await page.getByLabel(/^hours/).fill('168');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  await page.locator('table.answer').waitFor();
  await shot('run-as-key');

  await go('keys');
  await page.getByRole('button', { name: 'New key' }).click();
  await page.getByLabel('Name', { exact: true }).fill('partner');
  await page.getByLabel('Saved queries', { exact: true }).fill('example_film_lookup');
  await page.getByLabel('Rate limit', { exact: true }).fill('600/minute');
  await page.getByRole('button', { name: 'Add a mask rule' }).click();
  await page.getByLabel('Mask rule 1 column').fill('rating');
  await page.getByLabel('Mask rule 1 action').selectOption('null');
  await page.getByRole('button', { name: 'Create the key' }).click();
  await page.locator('.secret-value').waitFor();
  await shot('keys');

  await go('history');
  await page.getByText('Live: new runs appear here.').waitFor();
  await request(s.url, 'GET', '/q/example_film_lookup?film_id=7', { key: secret });
  await page.locator('.feed li').first().waitFor();
  await shot('history');

  await go('settings');
  await page.getByRole('row', { name: /QUERYAPIGATE_METADATA_CACHE_TTL/ }).waitFor();
  await shot('settings');
  await page.close();
} finally {
  await b.close();
  await s.stop();
}


