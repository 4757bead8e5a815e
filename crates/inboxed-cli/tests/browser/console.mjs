// The console in a real browser: Debian's Chromium, driven by playwright-core. Loads each view
// of a database filled by `inboxed demo` as a read-only user, at a desktop's and at a phone's
// width, and is refused an action; then, as an operator, retries dead letter FIRST and waits
// for its row to be processed, retries SECOND (which fails once more), replays its dead row
// and waits for it, and discards the remaining permanent letters after a confirmation that
// counts them; searches the rows by a value at a JSON path; retries the outbox's three dead
// rows from their list; checks that live refresh runs while the tab is shown and pauses while
// hidden. Takes a screenshot of each view.
//
// OPERATOR=name:token VIEWER=name:token node console.mjs BASE_URL SCREENSHOT_DIR FIRST SECOND BY_PATH
// (BY_PATH: how many of the two retried rows hold "acct-unknown" at the JSON path `to`)
// (exits non-zero, saying why, on any failure)

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const [base, shots, first, second, byPath] = process.argv.slice(2);
if (!base || !shots || !first || !second || !byPath) {
  console.error('usage: node console.mjs BASE_URL SCREENSHOT_DIR FIRST_LETTER SECOND_LETTER BY_PATH');
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

function expect(what, ok) {
  if (!ok) {
    throw new Error(`expected ${what}`);
  }
}

function credentials(name) {
  const [username, password] = (process.env[name] || '').split(':');
  return { username, password };
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});

async function open(user, width) {
  const context = await browser.newContext({
    viewport: { width, height: 900 },
    httpCredentials: credentials(user),
  });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.checkErrors = () => expect(`no script errors, found ${errors.join('; ')}`, errors.length === 0);
  return page;
}

async function fitsThePhone(page, width) {
  if (width < 500) {
    // At a phone's width tables scroll inside their box; the page itself never does.
    const pageWidth = await page.evaluate(() => document.documentElement.scrollWidth);
    expect(`a page no wider than the phone, found ${pageWidth}px`, pageWidth <= width);
  }
}

/// Waits, through the page's own live refresh, until the row's status reads `status`.
async function waitForStatus(page, status) {
  await page.locator('dd.status', { hasText: status }).waitFor({ timeout: 30000 });
}

/// Fills the confirmation's reason and submits it; the page after.
async function confirm(page, count, why) {
  const counted = await page.locator('p.count strong').first().innerText();
  expect(`a confirmation counting ${count}, found ${counted}`, counted === String(count));
  await page.fill('textarea[name=why]', why);
  await page.click('form[method=post] button[type=submit]');
  await page.waitForLoadState();
}

try {
  // Every view as the read-only user, at both widths.
  for (const [name, width] of [['desktop', 1280], ['phone', 375]]) {
    const page = await open('VIEWER', width);
    await page.goto(`${base}/`);
    expect('the overview', (await page.textContent('h1')) === 'Overview');
    const permanent = page.locator('a', { hasText: 'permanent' });
    expect('a link to the permanent dead letters', (await permanent.count()) === 1);
    const row = await permanent.locator('xpath=ancestor::tr').innerText();
    expect(`40 permanent dead letters in the overview, found "${row}"`, /\b40\b/.test(row));
    expect('the user named', (await page.locator('nav .who').innerText()).includes('viewer'));
    await fitsThePhone(page, width);
    await page.screenshot({ path: `${shots}/overview-${name}.png`, fullPage: true });

    await permanent.click();
    await page.waitForURL(/dead-letters\?consumer=demo&reason=permanent/);
    const summary = await page.locator('p.summary').innerText();
    expect(`40 shown, found "${summary}"`, summary.startsWith('40 shown'));
    expect('the filter kept in its form', (await page.inputValue('input[name=reason]')) === 'permanent');
    expect('no action for a read-only user', (await page.locator('.actions').count()) === 0);
    expect('a read-only note', (await page.locator('main').innerText()).includes('Read-only'));
    await fitsThePhone(page, width);
    await page.screenshot({ path: `${shots}/dead-letters-${name}.png` });

    await page.fill('input[name=error]', 'no such error text anywhere');
    await page.click('form[method=get] button[type=submit]');
    const none = await page.locator('p.summary').innerText();
    expect(`nothing matching, found "${none}"`, none.startsWith('0 shown'));

    await page.goBack();
    await page.locator('tbody a').first().click();
    await page.waitForURL(/dead-letters\/\d+$/);
    expect('a dead letter page', (await page.textContent('h1')).startsWith('Dead letter '));
    expect('the payload hidden', (await page.locator('main').innerText()).includes('Hidden'));
    await fitsThePhone(page, width);
    await page.screenshot({ path: `${shots}/dead-letter-${name}.png`, fullPage: true });

    const refused = await page.goto(`${base}/dead-letters/act?action=retry&id=${first}`);
    expect(`the read-only user refused, found ${refused.status()}`, refused.status() === 403);
    expect('a refusal saying why', (await page.locator('main').innerText()).includes('read-only'));
    page.checkErrors();
    await page.context().close();
  }

  // Live refresh: runs while the tab is shown, pauses while it is hidden.
  {
    const page = await open('VIEWER', 1280);
    await page.goto(`${base}/`);
    await page.waitForFunction(() => Number(document.body.dataset.refreshed || 0) >= 1, null, { timeout: 12000 });
    await page.evaluate(() => {
      Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
      document.dispatchEvent(new Event('visibilitychange'));
    });
    const before = await page.evaluate(() => Number(document.body.dataset.refreshed));
    await page.waitForTimeout(6500);
    const after = await page.evaluate(() => Number(document.body.dataset.refreshed));
    expect(`no refresh while hidden, found ${before} then ${after}`, before === after);
    page.checkErrors();
    await page.context().close();
  }

  // The operator's actions.
  const page = await open('OPERATOR', 1280);
  await page.goto(`${base}/dead-letters/${first}`);
  await page.click('text=Retry this one into the inbox');
  await page.screenshot({ path: `${shots}/confirm-desktop.png`, fullPage: true });
  await confirm(page, 1, 'transfer limit fixed');
  expect('one retried', (await page.locator('p.done').innerText()).startsWith('Retried 1'));
  await page.locator('main li a', { hasText: 'row ' }).first().click();
  await waitForStatus(page, 'done');
  await page.screenshot({ path: `${shots}/row-desktop.png`, fullPage: true });

  await page.goto(`${base}/dead-letters/${second}`);
  await page.click('text=Retry this one into the inbox');
  await confirm(page, 1, 'transfer limit fixed');
  await page.locator('main li a', { hasText: 'row ' }).first().click();
  await waitForStatus(page, 'dead');
  await page.click('text=Replay this row');
  await confirm(page, 1, 'the last worker has the fix now');
  expect('one replayed', (await page.locator('p.done').innerText()).startsWith('Set 1 row'));
  await page.locator('main li a', { hasText: 'row ' }).first().click();
  await waitForStatus(page, 'done');

  await page.goto(`${base}/dead-letters?consumer=demo&reason=permanent`);
  expect('38 left', (await page.locator('p.summary').innerText()).startsWith('38 shown'));
  await page.click('text=Discard all that match');
  await confirm(page, 38, 'test transfers to closed accounts');
  expect('38 discarded', (await page.locator('p.done').innerText()).startsWith('Discarded 38'));

  // The rows by a value at a JSON path of their payload: the retried transfers to the unknown
  // account (a payload cut short is not JSON and never matches).
  await page.goto(`${base}/rows?consumer=demo`);
  await page.fill('input[name=json]', 'to=acct-unknown');
  await page.click('form[method=get] button[type=submit]');
  const found = await page.locator('p.summary').innerText();
  expect(`${byPath} row(s) by JSON path, found "${found}"`, found.startsWith(`${byPath} shown`));
  await page.fill('input[name=json]', 'to=acct-000');
  await page.click('form[method=get] button[type=submit]');
  const noPath = await page.locator('p.summary').innerText();
  expect(`no row to acct-000, found "${noPath}"`, noPath.startsWith('0 shown'));

  // The outbox: from the overview's dead count to the list, then retry all three.
  await page.goto(`${base}/`);
  const receipts = page.locator('tr', { hasText: 'receipts' });
  await receipts.locator('a', { hasText: '3' }).click();
  await page.waitForURL(/outbox\?status=dead&destination=receipts/);
  expect('three dead receipts', (await page.locator('p.summary').innerText()).startsWith('3 shown'));
  await page.screenshot({ path: `${shots}/outbox-desktop.png`, fullPage: true });
  await page.click('text=Retry all dead rows that match');
  await confirm(page, 3, 'queue bound to receipts now');
  expect('three retried', (await page.locator('p.done').innerText()).startsWith('Retried 3'));
  await page.locator('main li a', { hasText: 'outbox row ' }).first().click();
  await waitForStatus(page, 'pending');
  await page.screenshot({ path: `${shots}/outbox-row-desktop.png`, fullPage: true });

  for (const [name, width] of [['desktop', 1280], ['phone', 375]]) {
    await page.setViewportSize({ width, height: 900 });
    await page.goto(`${base}/audit`);
    const records = await page.locator('tbody tr').count();
    expect(`five records on the audit trail, found ${records}`, records === 5);
    await fitsThePhone(page, width);
    await page.screenshot({ path: `${shots}/audit-${name}.png`, fullPage: true });
    await page.goto(`${base}/rows?consumer=demo`);
    expect('the two retried rows', (await page.locator('p.summary').innerText()).startsWith('2 shown'));
    await fitsThePhone(page, width);
    await page.screenshot({ path: `${shots}/rows-${name}.png`, fullPage: true });
  }
  page.checkErrors();
  console.log('console: every view and action checked in Chromium');
} finally {
  await browser.close();
}
