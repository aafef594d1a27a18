// Drives baton's Swagger UI (/docs) in Debian's headless Chromium with
// playwright-core: the page must load from the service alone, and "Try it out"
// on POST /locks/{name} must take a real lock.
//
// Env: BATON_URL (the running service), SCREENSHOT (PNG path to write),
// CHROMIUM (default /usr/bin/chromium).
// Prints one "ok - ..." or "not ok - ..." line per check, then
// "N passed, N failed"; exits non-zero when a check failed.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const BASE = (process.env.BATON_URL || '').replace(/\/+$/, '');
const SCREENSHOT = process.env.SCREENSHOT || path.join(os.tmpdir(), 'baton-swagger-ui.png');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const TIMEOUT_MS = 30_000;

let passed = 0;
let failed = 0;
function check(ok, what, detail) {
  if (ok) {
    passed += 1;
    console.log(`ok - ${what}`);
  } else {
    failed += 1;
    console.log(`not ok - ${what}${detail ? `: ${detail}` : ''}`);
  }
  return ok;
}

async function main() {
  if (!BASE) throw new Error('BATON_URL is not set');
  const origin = new URL(BASE).origin;
  const lockName = `swagger-ui-${process.pid}-${Date.now()}`;
  const owner = 'browser-test';

  // playwright-core refuses --user-data-dir in args: a persistent context is
  // how a fresh profile directory is handed to Chromium.
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    chromiumSandbox: false,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 1600 },
    timeout: TIMEOUT_MS,
  });

  const requests = [];
  const failures = [];
  const badStatus = [];
  context.on('request', (req) => requests.push(req.url()));
  context.on('requestfailed', (req) => {
    failures.push(`${req.method()} ${req.url()}: ${req.failure()?.errorText}`);
  });
  context.on('response', (res) => {
    // The page's own loads must all succeed; the API call made by "Execute"
    // is judged on its own below.
    const url = new URL(res.url());
    if (res.status() >= 400 && !url.pathname.startsWith('/locks/')) {
      badStatus.push(`${res.status()} ${res.url()}`);
    }
  });

  try {
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(TIMEOUT_MS);
    const pageErrors = [];
    page.on('pageerror', (err) => pageErrors.push(String(err)));

    const response = await page.goto(`${BASE}/docs`, { waitUntil: 'networkidle' });
    check(response && response.status() === 200, 'GET /docs answers 200', response && String(response.status()));

    const title = page.locator('.swagger-ui .info .title');
    await title.waitFor();
    const titleText = (await title.innerText()).trim();
    check(titleText.startsWith('baton'), 'Swagger UI renders the API title', titleText);

    const post = page.locator('.opblock.opblock-post', {
      has: page.locator('.opblock-summary-path[data-path="/locks/{name}"]'),
    });
    check((await post.count()) === 1, 'POST /locks/{name} is listed once', String(await post.count()));

    await post.locator('.opblock-summary').first().click();
    // The service turns "Try it out" on by default (tryItOutEnabled); the
    // button then says "Cancel". Turn it on only when it is off.
    const tryOut = post.locator('button.try-out__btn');
    if ((await tryOut.count()) > 0 && /try it out/i.test(await tryOut.innerText())) {
      await tryOut.click();
    }
    const nameInput = post.locator('tr[data-param-name="name"] input');
    await nameInput.fill(lockName);
    const body = post.locator('textarea.body-param__text');
    await body.fill(JSON.stringify({ ttl_ms: 120000, owner }));
    await post.locator('button.execute').click();

    const statusCell = post.locator('.live-responses-table .response .response-col_status').first();
    await statusCell.waitFor();
    const shownStatus = (await statusCell.innerText()).trim();
    check(shownStatus === '201', 'Execute shows 201 in the response section', shownStatus);

    const shownBody = (await post.locator('.live-responses-table .response-col_description pre').first().innerText()).trim();
    let lease = null;
    try {
      lease = JSON.parse(shownBody);
    } catch (err) {
      lease = null;
    }
    check(lease && lease.name === lockName && typeof lease.id === 'string' && lease.owner === owner,
      'the shown response body is the new lease', shownBody.slice(0, 300));

    await page.screenshot({ path: SCREENSHOT, fullPage: false });
    await post.scrollIntoViewIfNeeded();
    await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, '-execute.png'), fullPage: false });

    // The lock is really held, as anyone sees it.
    const statusRes = await fetch(`${BASE}/locks/${encodeURIComponent(lockName)}`);
    const status = await statusRes.json();
    check(statusRes.status === 200 && status.held === true && status.owner === owner,
      `GET /locks/${lockName} says held`, JSON.stringify(status));
    if (lease && lease.id) {
      const leaseRes = await fetch(`${BASE}/locks/${encodeURIComponent(lockName)}/${lease.id}`);
      check(leaseRes.status === 200, 'the lease id shown in the page is live', String(leaseRes.status));
      const del = await fetch(`${BASE}/locks/${encodeURIComponent(lockName)}/${lease.id}`, { method: 'DELETE' });
      check(del.status === 204, 'the lease id shown in the page releases the lock', String(del.status));
    }

    check(requests.length > 0, `the page made requests (${requests.length})`);
    const foreign = requests.filter((u) => !u.startsWith('data:') && new URL(u).origin !== origin);
    check(foreign.length === 0, 'every request goes to the service itself', foreign.join(', '));
    const ownLoads = ['/docs', '/openapi.json', '/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css'];
    for (const p of ownLoads) {
      check(requests.some((u) => !u.startsWith('data:') && new URL(u).pathname === p), `the page loaded ${p}`);
    }
    check(failures.length === 0, 'no request failed', failures.join('; '));
    check(badStatus.length === 0, 'no page resource answered 4xx/5xx', badStatus.join('; '));
    check(pageErrors.length === 0, 'no JavaScript error on the page', pageErrors.join('; '));
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main()
  .catch((err) => check(false, 'the browser test ran to the end', err && err.stack ? err.stack : String(err)))
  .finally(() => {
    console.log(`${passed} passed, ${failed} failed`);
    process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
  });
