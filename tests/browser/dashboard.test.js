// Drives baton's dashboard (GET /) in Debian's headless Chromium with
// playwright-core, on a service with API tokens: the page asks for a token,
// loads from the service alone, and shows a lock taken, queued for and
// released through the API within 1 s each, without a reload (a yield
// request shows beside the holder until it releases); a shared lock
// with two readers (each marked shared, a writer and a reader queued behind
// them), and a semaphore whose leases and waiters take several permits.
//
// Env: BATON_URL (the running service), BATON_TOKEN (one of its API tokens),
// SCREENSHOT (PNG path to write), CHROMIUM (default /usr/bin/chromium).
// Prints one "ok - ..." or "not ok - ..." line per check, then
// "N passed, N failed"; exits non-zero when a check failed.
'use strict';

const os = require('node:os');
const path = require('node:path');
const { TIMEOUT_MS, check, launch, run } = require('./harness');

const BASE = (process.env.BATON_URL || '').replace(/\/+$/, '');
const TOKEN = process.env.BATON_TOKEN || '';
const SCREENSHOT = process.env.SCREENSHOT || path.join(os.tmpdir(), 'baton-dashboard.png');
// How soon a change must show on the page.
const WITHIN_MS = 1000;


// A call to the API from outside the page, as a CI job would make it.
async function api(method, p, body) {
  const res = await fetch(`${BASE}${p}`, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

// Milliseconds until `predicate` holds in the page (polled every 20 ms), or null.
async function timeUntil(page, predicate, arg, limitMs) {
  const started = Date.now();
  try {
    await page.waitForFunction(predicate, arg, { timeout: limitMs, polling: 20 });
    return Date.now() - started;
  } catch (err) {
    return null;
  }
}

// Whether `locator` reaches `state` (default: attached) within 5 s.
async function shows(locator, options = {}) {
  return locator.waitFor({ timeout: 5000, ...options }).then(() => true, () => false);
}

function row(kind, name) {
  return `tr[data-kind="${kind}"][data-name="${name}"]`;
}

async function main() {
  if (!BASE) throw new Error('BATON_URL is not set');
  if (!TOKEN) throw new Error('BATON_TOKEN is not set');
  const origin = new URL(BASE).origin;
  const run = `${process.pid}-${Date.now()}`;
  const lockName = `dash-lock-${run}`;
  const semName = `dash-sem-${run}`;
  const sharedName = `dash-shared-${run}`;
  const permitsName = `dash-permits-${run}`;
  const firstOwner = `https://ci.example.com/jobs/${run}`;
  const queuedOwner = 'queued-job';

  const { context, close } = await launch({ width: 1400, height: 900 });

  const requests = [];
  const failures = [];
  const tokenInUrl = [];
  context.on('request', (req) => {
    requests.push(req.url());
    if (req.url().includes(TOKEN)) tokenInUrl.push(req.url());
  });
  context.on('requestfailed', (req) => {
    failures.push(`${req.method()} ${req.url()}: ${req.failure()?.errorText}`);
  });

  try {
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(TIMEOUT_MS);
    const pageErrors = [];
    page.on('pageerror', (err) => pageErrors.push(String(err)));

    const response = await page.goto(`${BASE}/`, { waitUntil: 'domcontentloaded' });
    check(response && response.status() === 200, 'GET / answers 200', response && String(response.status()));

    // A service with API tokens: the page asks for one. Each step is a check
    // of its own: whether the page got there within 5 s.
    const asked = await shows(page.locator('#token'), { state: 'visible' });
    check(asked, 'the page asks for an API token');
    await page.locator('#token').fill('not-a-token');
    await page.locator('#token-submit button[type=submit]').click();
    const refused = await shows(page.locator('#token-error').filter({ hasText: /refused/ }))
      && await shows(page.locator('#token'), { state: 'visible' });
    check(refused, 'a wrong token is refused and asked again');
    check(await page.locator('#conn[data-state="live"]').count() === 0, 'a wrong token does not make the page live');
    await page.locator('#token').fill(TOKEN);
    await page.locator('#token-submit button[type=submit]').click();
    const live = await shows(page.locator('#conn[data-state="live"]'));
    check(live, 'with a good token the page goes live');
    const stored = await page.evaluate(() => sessionStorage.getItem('baton-api-token'));
    check(stored === TOKEN, 'the token is kept in sessionStorage');
    const navigations = [];
    page.on('framenavigated', (frame) => { if (frame === page.mainFrame()) navigations.push(frame.url()); });

    // 1. A lock taken through the API.
    const first = await api('POST', `/locks/${lockName}`, { ttl_ms: 60000, owner: firstOwner });
    check(first.status === 201, 'the lock is taken through the API', JSON.stringify(first));
    let ms = await timeUntil(page, ([sel, owner]) => {
      const a = document.querySelector(`${sel} td.holders li a`);
      return a && a.textContent === owner && a.getAttribute('href') === owner;
    }, [row('lock', lockName), firstOwner], 5000);
    check(ms !== null && ms <= WITHIN_MS, `the held lock shows with its owner as a link within ${WITHIN_MS} ms (${ms} ms)`);

    const exclusive = await page.locator(`${row('lock', lockName)} td.mode .mode`).innerText();
    const marks = await page.locator(`${row('lock', lockName)} td.holders li`).evaluateAll((lis) => lis.map((li) =>
      `${li.dataset.shared}:${li.querySelector('.tag').textContent}`));
    check(exclusive === 'exclusive' && marks.join() === 'false:exclusive',
      'a plain lock shows as exclusive, its holder marked exclusive', `${exclusive}; ${marks}`);

    // Its countdown moves on its own.
    const leftBefore = await page.locator(`${row('lock', lockName)} .left`).innerText();
    await page.waitForTimeout(1200);
    const leftAfter = await page.locator(`${row('lock', lockName)} .left`).innerText();
    check(leftBefore !== leftAfter && /\d/.test(leftAfter), 'the time left counts down', `${leftBefore} -> ${leftAfter}`);

    // 2. A request queued for it.
    const queued = api('POST', `/locks/${lockName}`, { ttl_ms: 60000, wait_ms: 20000, owner: queuedOwner });
    ms = await timeUntil(page, (sel) => {
      const badge = document.querySelector(`${sel} td.waiting .badge`);
      return badge && badge.dataset.waiting === '1';
    }, row('lock', lockName), 5000);
    check(ms !== null && ms <= WITHIN_MS, `the queued request shows in the waiting line within ${WITHIN_MS} ms (${ms} ms)`);
    const lineOwner = await page.locator(`${row('lock', lockName)} ol.line li`).first().innerText({ timeout: 2000 }).catch(() => '');
    check(lineOwner.includes(queuedOwner), 'the waiting line names the queued owner', lineOwner);

    // A yield request shows beside the holder until the lease ends, by the
    // asking token's name (the `owner` typed counts only without tokens).
    const yieldAsked = await api('POST', `/locks/${lockName}/yield`, { owner: 'release-bot', reason: 'train at 5' });
    check(yieldAsked.status === 202 && yieldAsked.body.holders === 1, 'the holder is asked to yield through the API', JSON.stringify(yieldAsked));
    ms = await timeUntil(page, (sel) => {
      const y = document.querySelector(`${sel} td.holders .yield`);
      return y && y.textContent.includes('BATON_API_TOKENS') && !y.textContent.includes('release-bot')
        && y.textContent.includes('train at 5');
    }, row('lock', lockName), 5000);
    check(ms !== null && ms <= WITHIN_MS, `the yield request shows beside the holder within ${WITHIN_MS} ms (${ms} ms)`);

    // A semaphore too.
    const sem = await api('POST', `/semaphores/${semName}`, { limit: 3, ttl_ms: 60000, owner: 'worker-1' });
    check(sem.status === 201, 'a semaphore slot is taken through the API', JSON.stringify(sem));
    ms = await timeUntil(page, (sel) => {
      const cell = document.querySelector(`${sel} td.used .permits`);
      return cell && cell.textContent.trim() === '1 / 3';
    }, row('semaphore', semName), 5000);
    check(ms !== null && ms <= WITHIN_MS, `the semaphore shows 1 / 3 permits used within ${WITHIN_MS} ms (${ms} ms)`);

    // A shared lock: two readers hold it at once, each marked shared.
    const readers = [];
    for (const owner of ['reader-1', 'reader-2']) {
      readers.push(await api('POST', `/locks/${sharedName}`, { ttl_ms: 60000, owner, shared: true }));
    }
    check(readers.every((r) => r.status === 201 && r.body.shared === true),
      'two readers take the shared lock through the API', JSON.stringify(readers));
    ms = await timeUntil(page, (sel) => {
      const mode = document.querySelector(`${sel} td.mode .mode`);
      const lis = [...document.querySelectorAll(`${sel} td.holders li`)];
      return mode && mode.textContent === 'shared' && lis.length === 2
        && lis.every((li) => li.dataset.shared === 'true' && li.querySelector('.tag').textContent === 'shared')
        && lis.map((li) => li.querySelector('.owner').textContent).join() === 'reader-1,reader-2';
    }, row('lock', sharedName), 5000);
    check(ms !== null && ms <= WITHIN_MS, `the shared lock shows mode shared and both readers, each marked shared, within ${WITHIN_MS} ms (${ms} ms)`);
    const holdersText = await page.locator(`${row('lock', sharedName)} td.mode`).innerText();
    check(/2 holders/.test(holdersText), 'the shared lock counts 2 holders', holdersText);
    // A writer queued behind them, and a reader behind the writer.
    const writer = api('POST', `/locks/${sharedName}`, { ttl_ms: 60000, wait_ms: 20000, owner: 'writer' });
    ms = await timeUntil(page, (sel) => document.querySelectorAll(`${sel} ol.line li`).length === 1, row('lock', sharedName), 5000);
    check(ms !== null, `the writer shows in the shared lock's line (${ms} ms)`);
    const lateReader = api('POST', `/locks/${sharedName}`, { ttl_ms: 60000, wait_ms: 20000, owner: 'reader-3', shared: true });
    ms = await timeUntil(page, (sel) => {
      const lis = [...document.querySelectorAll(`${sel} ol.line li`)];
      return lis.length === 2
        && lis[0].dataset.shared === 'false' && lis[0].querySelector('.tag').textContent === 'exclusive'
        && lis[1].dataset.shared === 'true' && lis[1].querySelector('.tag').textContent === 'shared'
        && lis[1].querySelector('.owner').textContent === 'reader-3';
    }, row('lock', sharedName), 5000);
    check(ms !== null && ms <= WITHIN_MS, `the line shows the writer, then the reader behind it marked shared, within ${WITHIN_MS} ms (${ms} ms)`);

    // A semaphore with permits: 3 + 1 of 5 used, a waiter for 2 more.
    const big = await api('POST', `/semaphores/${permitsName}`, { limit: 5, permits: 3, ttl_ms: 60000, owner: 'big-1' });
    const small = await api('POST', `/semaphores/${permitsName}`, { limit: 5, ttl_ms: 60000, owner: 'small-1' });
    check(big.status === 201 && big.body.permits === 3 && small.status === 201 && small.body.permits === 1,
      'leases of 3 and 1 permits of 5 are taken through the API', JSON.stringify([big, small]));
    const big2 = api('POST', `/semaphores/${permitsName}`, { limit: 5, permits: 2, ttl_ms: 60000, wait_ms: 20000, owner: 'big-2' });
    ms = await timeUntil(page, (sel) => {
      const used = document.querySelector(`${sel} td.used .permits`);
      const leases = [...document.querySelectorAll(`${sel} td.holders li`)]
        .map((li) => `${li.querySelector('.owner').textContent}:${li.dataset.permits}:${li.querySelector('.tag').textContent}`);
      const waiters = [...document.querySelectorAll(`${sel} ol.line li`)]
        .map((li) => `${li.querySelector('.owner').textContent}:${li.dataset.permits}:${li.querySelector('.tag').textContent}`);
      const count = document.querySelector(`${sel} td.used .lease-count`);
      return used && used.textContent === '4 / 5' && count && count.textContent === '2 leases'
        && leases.join() === 'big-1:3:3 permits,small-1:1:1 permit'
        && waiters.join() === 'big-2:2:2 permits';
    }, row('semaphore', permitsName), 5000);
    check(ms !== null && ms <= WITHIN_MS, `the semaphore shows 4 / 5 permits used, each lease's and the waiter's permits, within ${WITHIN_MS} ms (${ms} ms)`);

    await page.screenshot({ path: SCREENSHOT, fullPage: false });

    // 3. The lock released: the queued request gets it.
    const released = await api('DELETE', `/locks/${lockName}/${first.body.id}`);
    check(released.status === 204, 'the lock is released through the API', String(released.status));
    ms = await timeUntil(page, ([sel, owner]) => {
      const holder = document.querySelector(`${sel} td.holders li .owner`);
      const badge = document.querySelector(`${sel} td.waiting .badge`);
      return holder && holder.textContent === owner && badge && badge.dataset.waiting === '0';
    }, [row('lock', lockName), queuedOwner], 5000);
    check(ms !== null && ms <= WITHIN_MS, `the hand-off to the queued request shows within ${WITHIN_MS} ms (${ms} ms)`);
    const second = await queued;
    check(second.status === 201, 'the queued request got the lock', JSON.stringify(second));
    check(await page.locator(`${row('lock', lockName)} td.holders .yield`).count() === 0,
      'the yield request is gone with the lease it was made to');

    // 4. Released for good: the lock leaves the page.
    if (second.body && second.body.id) await api('DELETE', `/locks/${lockName}/${second.body.id}`);
    ms = await timeUntil(page, (sel) => !document.querySelector(sel), row('lock', lockName), 5000);
    check(ms !== null && ms <= WITHIN_MS, `the released lock leaves the page within ${WITHIN_MS} ms (${ms} ms)`);
    if (sem.body && sem.body.id) await api('DELETE', `/semaphores/${semName}/${sem.body.id}`);

    // The readers leave: the writer holds the lock alone, the late reader waits on.
    for (const r of readers) if (r.body && r.body.id) await api('DELETE', `/locks/${sharedName}/${r.body.id}`);
    ms = await timeUntil(page, (sel) => {
      const mode = document.querySelector(`${sel} td.mode .mode`);
      const lis = [...document.querySelectorAll(`${sel} td.holders li`)];
      const line = [...document.querySelectorAll(`${sel} ol.line li`)];
      return mode && mode.textContent === 'exclusive' && lis.length === 1 && lis[0].dataset.shared === 'false'
        && lis[0].querySelector('.owner').textContent === 'writer'
        && line.length === 1 && line[0].dataset.shared === 'true';
    }, row('lock', sharedName), 5000);
    check(ms !== null && ms <= WITHIN_MS, `once the readers leave, the writer shows alone and exclusive, the late reader still in line, within ${WITHIN_MS} ms (${ms} ms)`);
    const wrote = await writer;
    if (wrote.body && wrote.body.id) await api('DELETE', `/locks/${sharedName}/${wrote.body.id}`);
    const late = await lateReader;
    check(wrote.status === 201 && wrote.body.shared === false && late.status === 201 && late.body.shared === true,
      'the writer, then the late reader, got the lock', JSON.stringify([wrote.status, late.status]));
    if (late.body && late.body.id) await api('DELETE', `/locks/${sharedName}/${late.body.id}`);

    // The big lease leaves: the waiter for 2 permits gets in (1 + 2 of 5).
    if (big.body && big.body.id) await api('DELETE', `/semaphores/${permitsName}/${big.body.id}`);
    ms = await timeUntil(page, (sel) => {
      const used = document.querySelector(`${sel} td.used .permits`);
      return used && used.textContent === '3 / 5' && !document.querySelector(`${sel} ol.line li`);
    }, row('semaphore', permitsName), 5000);
    check(ms !== null && ms <= WITHIN_MS, `the waiter for 2 permits shows admitted (3 / 5) within ${WITHIN_MS} ms (${ms} ms)`);
    const got = await big2;
    check(got.status === 201 && got.body.permits === 2, 'the waiter for 2 permits got its lease', JSON.stringify(got));
    for (const l of [small, got]) if (l.body && l.body.id) await api('DELETE', `/semaphores/${permitsName}/${l.body.id}`);

    const shown = await page.locator('#events li[data-name]').evaluateAll((items, name) => items
      .filter((li) => li.dataset.name === name).map((li) => li.dataset.event), lockName);
    for (const ev of ['acquired', 'queued', 'released']) {
      check(shown.includes(ev), `recent events list "${ev}" for the lock`, shown.join(', '));
    }
    await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, '-after.png'), fullPage: false });

    check(navigations.length === 0, 'the page never reloaded', navigations.join(', '));
    const docs = await page.locator('header a[href="docs"]').count();
    check(docs === 1, 'the page links Swagger UI');
    check(requests.length > 0, `the page made requests (${requests.length})`);
    const foreign = requests.filter((u) => !u.startsWith('data:') && new URL(u).origin !== origin);
    check(foreign.length === 0, 'every request goes to the service itself', foreign.join(', '));
    check(tokenInUrl.length === 0, 'the token never appears in a URL', tokenInUrl.join(', '));
    check(requests.some((u) => new URL(u).pathname === '/events'), 'the page follows /events');
    check(failures.length === 0, 'no request failed', failures.join('; '));
    check(pageErrors.length === 0, 'no JavaScript error on the page', pageErrors.join('; '));
  } finally {
    await close();
  }
}

run(main);
