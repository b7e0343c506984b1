// The browser the console's tests drive: Debian's Chromium (/usr/bin/chromium, installed by
// scripts/ensure-chromium.sh from `npm test`'s pretest) through playwright-core, headless, with a
// fresh profile that is removed after. playwright-core never downloads a browser of its own.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

export const CHROMIUM = process.env.QUERYAPIGATE_TEST_CHROMIUM ?? '/usr/bin/chromium';

export interface TestBrowser {
  /** The one context of the fresh profile (a persistent context: Playwright takes the profile folder so). */
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  const profile = mkdtempSync(join(tmpdir(), 'qag-chromium-'));
  // launchPersistentContext passes the folder as --user-data-dir (Playwright refuses it among `args`).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/**
 * A page that ignores the CSP, for axe: the console's CSP allows no inline script, and
 * addScriptTag injects one. Only this page is exempt (DevTools' Page.setBypassCSP); the others keep
 * the CSP, and the tests check that nothing on them breaks it.
 */
export async function auditPage(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Page.setBypassCSP', { enabled: true });
  return page;
}

/** axe-core's serious and critical violations on the page as it is (axe injected from node_modules). */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.addScriptTag({ path: AXE });
  const found = await page.evaluate(async () => {
    // biome-ignore lint/suspicious/noExplicitAny: axe is the global the injected script defines
    const axe = (globalThis as any).axe;
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v: AxeViolation) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  });
  return (found as AxeViolation[]).filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
