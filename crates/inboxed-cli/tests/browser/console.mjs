// The console in a real browser: Debian's Chromium, driven by playwright-core. Loads each view
// of a database filled by `inboxed demo`, at a desktop's and at a phone's width, follows the
// links an operator follows, and takes a screenshot of each view.
//
// node console.mjs BASE_URL SCREENSHOT_DIR   (exits non-zero, saying why, on any failure)

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const [base, shots] = process.argv.slice(2);
if (!base || !shots) {
  console.error('usage: node console.mjs BASE_URL SCREENSHOT_DIR');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

function expect(what, ok) {
  if (!ok) {
    throw new Error(`expected ${what}`);
  }
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
try {
  for (const [name, width] of [['desktop', 1280], ['phone', 375]]) {
    const page = await browser.newPage({ viewport: { width, height: 900 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));

    await page.goto(`${base}/`);
    expect('the overview', (await page.textContent('h1')) === 'Overview');
    const permanent = page.locator('a', { hasText: 'permanent' });
    expect('a link to the permanent dead letters', (await permanent.count()) === 1);
    const row = await permanent.locator('xpath=ancestor::tr').innerText();
    expect(`40 permanent dead letters in the overview, found "${row}"`, /\b40\b/.test(row));
    await page.screenshot({ path: `${shots}/overview-${name}.png`, fullPage: true });

    await permanent.click();
    await page.waitForURL(/dead-letters\?consumer=demo&reason=permanent/);
    const summary = await page.locator('main > p').first().innerText();
    expect(`40 shown, found "${summary}"`, summary.startsWith('40 shown'));
    expect('the filter kept in its form', (await page.inputValue('input[name=reason]')) === 'permanent');
    if (width < 500) {
      // At a phone's width the table scrolls inside its box; the page itself never does.
      const pageWidth = await page.evaluate(() => document.documentElement.scrollWidth);
      expect(`a page no wider than the phone, found ${pageWidth}px`, pageWidth <= width);
    }
    await page.screenshot({ path: `${shots}/dead-letters-${name}.png` });

    await page.fill('input[name=error]', 'no such error text anywhere');
    await page.click('button[type=submit]');
    const none = await page.locator('main > p').first().innerText();
    expect(`nothing matching, found "${none}"`, none.startsWith('0 shown'));

    await page.goBack();
    await page.locator('tbody a').first().click();
    await page.waitForURL(/dead-letters\/\d+$/);
    expect('a dead letter page', (await page.textContent('h1')).startsWith('Dead letter '));
    expect('the payload hidden', (await page.locator('main').innerText()).includes('Hidden'));
    await page.screenshot({ path: `${shots}/dead-letter-${name}.png`, fullPage: true });

    expect(`no script errors, found ${errors.join('; ')}`, errors.length === 0);
    await page.close();
  }
  console.log('console: every view checked in Chromium');
} finally {
  await browser.close();
}
