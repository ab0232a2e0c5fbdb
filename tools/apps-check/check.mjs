// The MCP Apps host check (issue 43): a host page in headless Debian chromium, built
// from @modelcontextprotocol/ext-apps's AppBridge and the MCP TypeScript SDK's client
// (host.mjs, bundled here by esbuild), connects to `reasoning-ledger serve` over stdio
// (each JSON-RPC line passed by this Node side) and over streamable HTTP (the page's
// /mcp, passed on to `serve --http`), declares the extension, calls the tools as a
// model would, and renders the app resource in a sandboxed iframe under the spec's
// default policy. It checks: the nodes drawn are the SVG export's (data-seq and kind),
// a branch and a revision among them; a further result updates the open app, and so
// does a thought another process records; the replay slider and a node's link; the
// app-only tool works through the host (the app draws through it) and the model is not
// offered it; a client without the extension sees no app at all; the app makes no
// request and logs no error. Screenshots at 400 and 1,200 px, light and dark, go to
// SHOTS_DIR.
//
// Usage: node check.mjs BINARY SHOTS_DIR
import { chromium } from 'playwright-core';
import * as esbuild from 'esbuild';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

const HERE = dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
// Sandboxed iframes run out of process otherwise, and their requests go unseen.
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-features=IsolateSandboxedIframes',
];
const ORIGIN = 'http://host.test';
const TOKEN = 'apps-check-token-of-at-least-32-characters';
const APP_URI = 'ui://reasoning-ledger/session.html';
const MIME = 'text/html;profile=mcp-app';
const PATIENCE = 30_000;

const [BIN, SHOTS] = process.argv.slice(2);
if (!BIN || !SHOTS) fail('usage: node check.mjs BINARY SHOTS_DIR');

function fail(message) {
  console.error(`apps-check: ${message}`);
  process.exit(1);
}

function assertEqual(got, want, what) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) fail(`${what}: got ${g.slice(0, 600)}, want ${w.slice(0, 600)}`);
}

function assert(ok, what) { if (!ok) fail(what); }

const children = [];
process.on('exit', () => { for (const child of children) child.kill('SIGKILL'); });

// The default toolsets and export: the check compares the app's drawing with export_session's
// SVG (the export toolset is off by default).
function serve(dir, extra, env = {}) {
  const child = spawn(BIN, ['serve', '--data-dir', dir, '--toolsets', 'thinking,ledger,export', ...extra], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, DISABLE_THOUGHT_LOGGING: 'true', RUST_LOG: 'warn', ...env },
  });
  children.push(child);
  return child;
}

/// The nodes (`<g class="node…`) of an SVG text: [seq, kind] in order.
function svgNodes(svg) {
  const nodes = [];
  for (const match of svg.matchAll(/<g class="node(?: [^"]*)?"[^>]*>/g)) {
    const seq = /data-seq="(\d+)"/.exec(match[0]);
    const kind = /data-kind="([^"]+)"/.exec(match[0]);
    nodes.push([Number(seq[1]), kind[1]]);
  }
  return nodes;
}

/// A thought recorded by another process (a second `serve` on the same data directory):
/// initialize, one call, its answer.
async function recordElsewhere(dir, args) {
  const child = serve(dir, []);
  const lines = createInterface({ input: child.stdout });
  const answers = new Map();
  const waiters = new Map();
  lines.on('line', (line) => {
    const message = JSON.parse(line);
    if (message.id === undefined) return;
    (waiters.get(message.id) || ((m) => answers.set(message.id, m)))(message);
  });
  const ask = (id, method, params) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer to ${method}`)), PATIENCE);
    waiters.set(id, (m) => { clearTimeout(timer); resolve(m); });
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
  });
  await ask(1, 'initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'elsewhere', version: '1' } });
  child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  const answer = await ask(2, 'tools/call', { name: 'sequentialthinking', arguments: args });
  child.stdin.end();
  if (answer.error || answer.result.isError) fail(`the other process's thought failed: ${JSON.stringify(answer)}`);
  return answer.result;
}

async function hostPage() {
  const built = await esbuild.build({
    entryPoints: [join(HERE, 'host.mjs')], bundle: true, write: false, format: 'iife',
    platform: 'browser', target: 'chrome120', logLevel: 'error',
  });
  const script = built.outputFiles[0].text.replaceAll('</script', '<\\/script');
  return '<!DOCTYPE html><html><head><meta charset="utf-8"><title>apps-check host</title>' +
    '<style>body{margin:0;padding:8px;font:14px sans-serif;background:#f1f3f5}' +
    '#views{width:1200px}iframe{display:block;width:100%;height:200px;border:1px solid #adb5bd;background:#fff}</style>' +
    `</head><body><div id="views"></div><script>${script}</script></body></html>`;
}

async function check(browser, html, mode, shots) {
  const dir = mkdtempSync(join(tmpdir(), 'apps-check-'));
  const requests = [];
  const errors = [];
  const context = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
  const page = await context.newPage();
  page.on('request', (request) => {
    if (request.frame() !== page.mainFrame() && request.url() !== 'about:srcdoc') requests.push(request.url());
  });
  page.on('console', (message) => {
    // The host's own stream of server notifications, refused above, is not the app's.
    if (message.type() === 'error' && message.location().url !== `${ORIGIN}/mcp`) errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(String(error)));
  await page.route(`${ORIGIN}/`, (route) => route.fulfill({ contentType: 'text/html', body: html }));
  let server;
  if (mode === 'stdio') {
    // One `serve` per channel the page opens (the host's client, the plain client).
    const servers = new Map();
    const open = (channel) => {
      const child = serve(dir, []);
      child.stderr.resume();
      createInterface({ input: child.stdout }).on('line', (line) => {
        if (process.env.APPS_CHECK_TRACE) console.log(channel, '<', line.slice(0, 300));
        page.evaluate(([c, l]) => window.__fromServer[c](l), [channel, line]).catch(() => {});
      });
      servers.set(channel, child);
      return child;
    };
    await page.exposeFunction('__toServer', (channel, line) => {
      if (process.env.APPS_CHECK_TRACE) console.log(channel, '>', line.slice(0, 300));
      (servers.get(channel) || open(channel)).stdin.write(`${line}\n`);
    });
    server = { kill: (signal) => { for (const child of servers.values()) child.kill(signal); } };
  } else {
    server = serve(dir, ['--http', '127.0.0.1:0', '--allowed-origin', `${ORIGIN}:80`], { REASONING_LEDGER_TOKEN: TOKEN });
    const url = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('serve --http said no address')), PATIENCE);
      createInterface({ input: server.stderr }).on('line', (line) => {
        const found = /serving MCP .* at (http:\/\/\S+)/.exec(line);
        if (found) { clearTimeout(timer); resolve(found[1]); }
      });
    });
    await page.addInitScript((token) => { window.__token = token; }, TOKEN);
    await page.route(`${ORIGIN}/mcp`, async (route) => {
      const request = route.request();
      // The one long-lived stream (server notifications) is not needed here.
      if (request.method() === 'GET') return route.fulfill({ status: 405, body: '' });
      const response = await route.fetch({ url, headers: request.headers() });
      return route.fulfill({ response });
    });
  }
  await page.goto(`${ORIGIN}/`);
  await page.waitForSelector('body[data-host-ready="1"]');

  const info = await page.evaluate((m) => window.host.start(m), mode);
  assert(!info.modelTools.includes('draw_session'), `${mode}: the model is offered draw_session`);
  assertEqual(info.appTools, ['draw_session'], `${mode}: app-only tools`);
  assert(info.linked.some(([name, uri]) => name === 'sequentialthinking' && uri === APP_URI), `${mode}: sequentialthinking names the app`);
  assert(info.resources.some(([uri, mime]) => uri === APP_URI && mime === MIME), `${mode}: the app is listed`);
  assert(!info.plainTools.includes('draw_session') && info.plainMetas === 0, `${mode}: a client without the extension saw the app`);
  assertEqual(info.plainTools, info.modelTools, `${mode}: the model's tools with and without the extension`);

  const call = (name, args) => page.evaluate(([n, a]) => window.host.call(n, a), [name, args]);
  const first = await call('sequentialthinking', { thought: 'Weigh the three <b>options</b>', thoughtNumber: 1, totalThoughts: 4, nextThoughtNeeded: true });
  const session = first.structuredContent.sessionId;
  const frame = page.frameLocator('#app');
  const lastSeq = (n) => frame.locator(`body[data-last-seq="${n}"]`).waitFor({ state: 'attached', timeout: PATIENCE });
  await lastSeq(2);
  await call('sequentialthinking', { sessionId: session, thought: 'Option A is cheapest but slow to build', thoughtNumber: 2, totalThoughts: 4, nextThoughtNeeded: true });
  await call('sequentialthinking', { sessionId: session, thought: 'What if we branch: option B, bought rather than built', thoughtNumber: 3, totalThoughts: 4, nextThoughtNeeded: true, branchFromThought: 1, branchId: 'buy' });
  await call('sequentialthinking', { sessionId: session, thought: 'Revising 2: option A also needs a second team', thoughtNumber: 4, totalThoughts: 4, nextThoughtNeeded: true, isRevision: true, revisesThought: 2 });
  // A further call updates the open app (the host hands the open view each result).
  await lastSeq(5);
  const drawn = async () => frame.locator('#picture g.node').evaluateAll((nodes) =>
    nodes.map((n) => [Number(n.getAttribute('data-seq')), n.getAttribute('data-kind')]));
  const exported = async () => svgNodes((await page.evaluate((id) =>
    window.host.callPlain('export_session', { sessionId: id, format: 'svg' }), session)).content[0].text);
  assertEqual(await drawn(), await exported(), `${mode}: nodes drawn vs the SVG export`);
  const kinds = (await drawn()).map(([, kind]) => kind);
  assert(kinds.includes('branch') && kinds.includes('revision'), `${mode}: a branch and a revision are marked: ${kinds}`);
  assert(await frame.locator('#picture path[data-edge="revises"]').count() === 1, `${mode}: the revision's edge`);
  assert(await frame.locator('#picture path[data-edge="branches_from"]').count() === 1, `${mode}: the branch's edge`);

  // Live from elsewhere: another process records; the open app follows on its own.
  await recordElsewhere(dir, { sessionId: session, thought: 'Decision: option B, recorded by a teammate', thoughtNumber: 5, totalThoughts: 5, nextThoughtNeeded: false });
  await lastSeq(6);
  assertEqual(await drawn(), await exported(), `${mode}: nodes after another process's thought`);

  // The replay slider and a node's link to its full text.
  const slider = frame.locator('#replay');
  await slider.evaluate((s) => { s.value = '3'; s.dispatchEvent(new Event('input', { bubbles: true })); });
  const shown = await frame.locator('#picture g.node:not(.later)').evaluateAll((nodes) => nodes.map((n) => Number(n.getAttribute('data-seq'))));
  assertEqual(shown, [2, 3], `${mode}: nodes at event 3`);
  await slider.evaluate((s) => { s.value = s.max; s.dispatchEvent(new Event('input', { bubbles: true })); });
  await frame.locator('#picture a[href="#thought-5"]').click();
  const picked = frame.locator('#thoughts li.picked');
  await picked.waitFor({ timeout: PATIENCE });
  assertEqual(await picked.getAttribute('data-seq'), '5', `${mode}: the node's link opens its thought`);
  assert((await picked.textContent()).includes('Revising 2: option A also needs a second team'), `${mode}: the full text`);

  if (shots) {
    for (const [theme, width] of [['light', 1200], ['light', 400], ['dark', 400], ['dark', 1200]]) {
      await page.evaluate(([t, w]) => { window.host.width(w); return window.host.theme(t); }, [theme, width]);
      await frame.locator(`html[data-theme="${theme}"]`).waitFor({ state: 'attached', timeout: PATIENCE });
      await page.waitForTimeout(400);
      await page.locator('#app').screenshot({ path: join(shots, `app-${width}-${theme}.png`) });
    }
  }
  assertEqual(requests, [], `${mode}: requests the app made`);
  assertEqual(errors, [], `${mode}: errors logged`);
  await page.unrouteAll({ behavior: 'ignoreErrors' });
  await context.close();
  server.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
  console.log(`apps-check: ${mode}: the app drew the export's nodes, followed two sources, replayed; no request, no error`);
}

if (!existsSync(CHROMIUM)) fail(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`);
mkdirSync(SHOTS, { recursive: true });
const html = await hostPage();
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
try {
  await check(browser, html, 'stdio', SHOTS);
  await check(browser, html, 'http', null);
} finally {
  await browser.close();
}
console.log(`apps-check: screenshots in ${SHOTS}`);
