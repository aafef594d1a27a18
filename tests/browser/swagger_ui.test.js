// Drives baton's Swagger UI (/docs) in Debian's headless Chromium with
// playwright-core: the page must load from the service alone, be titled
// "baton" with acquire first in its group, and "Try it out" on
// POST /locks/{name} must take a real lock. All of it twice: directly, and
// through a reverse proxy (started here) that serves baton under /baton and
// says so in X-Forwarded-Prefix.
//
// Env: BATON_URL (the running service), SCREENSHOT (PNG path to write),
// CHROMIUM (default /usr/bin/chromium).
// Prints one "ok - ..." or "not ok - ..." line per check, then
// "N passed, N failed"; exits non-zero when a check failed.
'use strict';

const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const { TIMEOUT_MS, check, launch, run } = require('./harness');

const BASE = (process.env.BATON_URL || '').replace(/\/+$/, '');
const SCREENSHOT = process.env.SCREENSHOT || path.join(os.tmpdir(), 'baton-swagger-ui.png');


// A reverse proxy on a free port: /baton/... goes to baton as /..., with
// X-Forwarded-Prefix: /baton; anything else is 404. Resolves to its origin.
function startProxy(target) {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    if (!req.url.startsWith(`${PROXY_PREFIX}/`)) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not under the proxy prefix');
      return;
    }
    const headers = { ...req.headers, host: upstream.host, 'x-forwarded-prefix': PROXY_PREFIX };
    const forward = http.request({
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url.slice(PROXY_PREFIX.length),
      headers,
    }, (answer) => {
      res.writeHead(answer.statusCode, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', (err) => {
      res.writeHead(502);
      res.end(String(err));
    });
    req.pipe(forward);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ server, origin: `http://127.0.0.1:${server.address().port}` }));
  });
}

const PROXY_PREFIX = '/baton';

// Loads /docs under `base` and takes a lock with "Try it out"; `label` names
// the checks ("direct" or "behind a proxy").
async function exercise(context, base, label, screenshot) {
  const origin = new URL(base).origin;
  const basePath = new URL(base).pathname.replace(/\/+$/, '');
  const lockName = `swagger-ui-${process.pid}-${Date.now()}`;
  const owner = 'browser-test';

  const requests = [];
  const failures = [];
  const badStatus = [];
  const onRequest = (req) => requests.push(req.url());
  const onFailed = (req) => failures.push(`${req.method()} ${req.url()}: ${req.failure()?.errorText}`);
  const onResponse = (res) => {
    // The page's own loads must all succeed; the API call made by "Execute"
    // is judged on its own below.
    const url = new URL(res.url());
    if (res.status() >= 400 && !url.pathname.startsWith(`${basePath}/locks/`)) {
      badStatus.push(`${res.status()} ${res.url()}`);
    }
  };
  context.on('request', onRequest);
  context.on('requestfailed', onFailed);
  context.on('response', onResponse);

  const page = await context.newPage();
  try {
    page.setDefaultTimeout(TIMEOUT_MS);
    const pageErrors = [];
    page.on('pageerror', (err) => pageErrors.push(String(err)));

    const response = await page.goto(`${base}/docs`, { waitUntil: 'networkidle' });
    check(response && response.status() === 200, `${label}: GET /docs answers 200`, response && String(response.status()));

    const title = page.locator('.swagger-ui .info .title');
    await title.waitFor();
    const titleText = (await title.innerText()).trim();
    check(titleText.startsWith('baton'), `${label}: Swagger UI renders the API title`, titleText);
    check((await page.title()) === 'baton', `${label}: the page is titled "baton"`, await page.title());

    for (const tag of ['locks', 'semaphores']) {
      const section = page.locator('.opblock-tag-section', { has: page.locator(`h3.opblock-tag[data-tag="${tag}"]`) });
      const first = section.locator('.opblock').first();
      const method = (await first.locator('.opblock-summary-method').innerText()).trim();
      const firstPath = await first.locator('.opblock-summary-path').getAttribute('data-path');
      check(method === 'POST' && firstPath === `/${tag}/{name}`, `${label}: acquire is listed first under ${tag}`, `${method} ${firstPath}`);
    }

    const post = page.locator('.opblock.opblock-post', {
      has: page.locator('.opblock-summary-path[data-path="/locks/{name}"]'),
    });
    check((await post.count()) === 1, `${label}: POST /locks/{name} is listed once`, String(await post.count()));

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
    const executed = page.waitForRequest((req) => req.method() === 'POST' && req.url().includes(encodeURIComponent(lockName)));
    await post.locator('button.execute').click();
    const apiCall = (await executed).url();
    check(apiCall === `${base}/locks/${encodeURIComponent(lockName)}`, `${label}: Execute calls the API under the page's own base`, apiCall);

    const statusCell = post.locator('.live-responses-table .response .response-col_status').first();
    await statusCell.waitFor();
    const shownStatus = (await statusCell.innerText()).trim();
    check(shownStatus === '201', `${label}: Execute shows 201 in the response section`, shownStatus);

    const shownBody = (await post.locator('.live-responses-table .response-col_description pre').first().innerText()).trim();
    let lease = null;
    try {
      lease = JSON.parse(shownBody);
    } catch (err) {
      lease = null;
    }
    check(lease && lease.name === lockName && typeof lease.id === 'string' && lease.owner === owner,
      `${label}: the shown response body is the new lease`, shownBody.slice(0, 300));

    await page.screenshot({ path: screenshot, fullPage: false });
    await post.scrollIntoViewIfNeeded();
    await page.screenshot({ path: screenshot.replace(/\.png$/, '-execute.png'), fullPage: false });

    // The lock is really held, as anyone sees it (asked of baton directly).
    const statusRes = await fetch(`${BASE}/locks/${encodeURIComponent(lockName)}`);
    const status = await statusRes.json();
    check(statusRes.status === 200 && status.held === true && status.owner === owner,
      `${label}: GET /locks/${lockName} says held`, JSON.stringify(status));
    if (lease && lease.id) {
      const leaseRes = await fetch(`${BASE}/locks/${encodeURIComponent(lockName)}/${lease.id}`);
      check(leaseRes.status === 200, `${label}: the lease id shown in the page is live`, String(leaseRes.status));
      const del = await fetch(`${BASE}/locks/${encodeURIComponent(lockName)}/${lease.id}`, { method: 'DELETE' });
      check(del.status === 204, `${label}: the lease id shown in the page releases the lock`, String(del.status));
    }

    check(requests.length > 0, `${label}: the page made requests (${requests.length})`);
    const foreign = requests.filter((u) => !u.startsWith('data:') && new URL(u).origin !== origin);
    check(foreign.length === 0, `${label}: every request goes to the page's own origin`, foreign.join(', '));
    const outside = requests.filter((u) => !u.startsWith('data:') && !new URL(u).pathname.startsWith(`${basePath}/`));
    check(outside.length === 0, `${label}: every request stays under ${basePath || '/'}`, outside.join(', '));
    const ownLoads = ['/docs', '/openapi.json', '/docs/swagger-ui-bundle.js', '/docs/swagger-ui.css'];
    for (const p of ownLoads) {
      check(requests.some((u) => !u.startsWith('data:') && new URL(u).pathname === `${basePath}${p}`), `${label}: the page loaded ${basePath}${p}`);
    }
    check(failures.length === 0, `${label}: no request failed`, failures.join('; '));
    check(badStatus.length === 0, `${label}: no page resource answered 4xx/5xx`, badStatus.join('; '));
    check(pageErrors.length === 0, `${label}: no JavaScript error on the page`, pageErrors.join('; '));
  } finally {
    context.off('request', onRequest);
    context.off('requestfailed', onFailed);
    context.off('response', onResponse);
    await page.close();
  }
}

async function main() {
  if (!BASE) throw new Error('BATON_URL is not set');

  const { context, close } = await launch({ width: 1280, height: 1600 });
  const proxy = await startProxy(BASE);
  try {
    await exercise(context, BASE, 'direct', SCREENSHOT);
    await exercise(context, `${proxy.origin}${PROXY_PREFIX}`, 'behind a proxy', SCREENSHOT.replace(/\.png$/, '-proxy.png'));
  } finally {
    proxy.server.close();
    await close();
  }
}

run(main);
