// What the browser tests share: "ok - ..." / "not ok - ..." checks with a
// closing "N passed, N failed" line, and Debian's headless Chromium started
// with a fresh profile.
'use strict';

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { chromium } = require('playwright-core');

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const TIMEOUT_MS = 30_000;

let passed = 0;
let failed = 0;

// Prints one line for a check; returns `ok`.
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

// Runs `main`, counts a throw as a failed check, prints the closing line and
// sets the exit code (non-zero when a check failed or none ran).
function run(main) {
  main()
    .catch((err) => check(false, 'the browser test ran to the end', err && err.stack ? err.stack : String(err)))
    .finally(() => {
      console.log(`${passed} passed, ${failed} failed`);
      process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
    });
}

// Chromium with a fresh profile and the given viewport. playwright-core
// refuses --user-data-dir in args: a persistent context is how a fresh
// profile directory is handed to Chromium. Resolves to { context, close }.
async function launch(viewport) {
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
    viewport,
    timeout: TIMEOUT_MS,
  });
  const close = async () => {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  };
  return { context, close };
}

module.exports = { TIMEOUT_MS, check, launch, run };
