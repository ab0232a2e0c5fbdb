#!/usr/bin/env node
// Loads reasoning-ledger's HTML exports (and its `ui`) in headless Debian chromium through
// playwright-core (no browser download) and checks them against the projection.
//
//   node check.mjs pages DIR SHOTS   every DIR/NAME.html with DIR/NAME.expect.json beside it
//   node check.mjs paint FILE SHOTS   benchmark, not a test: first paint and script-ready
//                                     times of one page (median of 5 loads)
//   node check.mjs ui BIN DATA SHOTS  starts `BIN --data-dir DATA ui`, appends from another
//                                     process, waits for the page to show it
//
// Fails (exit 1) on the first difference; screenshots go to SHOTS. Chromium missing is a
// failure, never a skip.
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/// Processes this check started, stopped however it ends.
const children = new Set();
process.on('exit', () => { for (const child of children) child.kill(); });

function fail(message) {
  console.error(`browser-check: ${message}`);
  process.exit(1);
}

function assertEqual(got, want, what) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) fail(`${what}: got ${g.slice(0, 400)}, want ${w.slice(0, 400)}`);
}

async function launch() {
  if (!existsSync(CHROMIUM)) fail(`${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`);
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
}

/// A page that records what a hostile text might make it do: dialogs, requests other
/// than the page itself, CSP violations, errors.
async function guardedPage(browser, allowedOrigin) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const incidents = [];
  page.on('dialog', async (dialog) => { incidents.push(`dialog: ${dialog.message()}`); await dialog.dismiss(); });
  page.on('pageerror', (error) => incidents.push(`page error: ${error.message}`));
  page.on('request', (request) => {
    const url = request.url();
    if (!(allowedOrigin(url))) incidents.push(`request: ${url}`);
  });
  await page.addInitScript(() => {
    window.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  return { page, incidents };
}

async function visibleSeqs(page, selector) {
  return page.$$eval(selector, (elements) => elements
    .filter((e) => getComputedStyle(e).display !== 'none')
    .map((e) => Number(e.getAttribute('data-seq'))));
}

/// [seq, kind, text] of every node shown, in document order: its label's text as drawn
/// (the text of its `<text>` elements, leaving out hidden parts and the tooltip).
async function shownNodes(page) {
  return page.$$eval('#picture g.node', (elements) => elements
    .filter((e) => getComputedStyle(e).display !== 'none')
    .map((node) => {
      let text = '';
      const walk = (element) => {
        for (const child of element.childNodes) {
          if (child.nodeType === Node.TEXT_NODE) text += child.data;
          else if (child.nodeType === Node.ELEMENT_NODE && getComputedStyle(child).display !== 'none') walk(child);
        }
      };
      for (const label of node.querySelectorAll(':scope > text')) walk(label);
      return [Number(node.getAttribute('data-seq')), node.getAttribute('data-kind'), text];
    }));
}

async function checkPage(browser, file, shots) {
  const name = file.replace(/\.html$/, '').split('/').pop();
  const expect = JSON.parse(readFileSync(file.replace(/\.html$/, '.expect.json'), 'utf8'));
  const url = pathToFileURL(resolve(file)).href;
  const { page, incidents } = await guardedPage(browser, (u) => u === url || u.startsWith(`${url}#`));
  const started = Date.now();
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 30000 });
  const loadMs = Date.now() - started;

  // Counts, seqs and kinds equal the projection's: the thoughts' nodes and the families'
  // (plan approaches, evaluations, QA tools…), the edges and links, the listed events.
  const nodes = await page.$$eval('#picture g.node', (els) => els.map((e) => [Number(e.getAttribute('data-seq')), e.getAttribute('data-kind')]));
  assertEqual(nodes, expect.nodes, `${name}: nodes (seq, kind)`);
  const edges = await page.$$eval('#picture path.edge', (els) => els.map((e) => ({
    from: Number(e.getAttribute('data-from')), to: Number(e.getAttribute('data-to')), kind: e.getAttribute('data-edge'),
  })));
  const key = (e) => `${e.from}-${e.to}-${e.kind}`;
  assertEqual(edges.map(key).sort(), expect.edges.map(key).sort(), `${name}: edges`);
  const items = await page.$$eval('#thoughts > li', (els) => els.map((e) => Number(e.getAttribute('data-seq'))));
  assertEqual(items, expect.items, `${name}: listed events`);
  await page.screenshot({ path: join(shots, `${name}.png`) });

  // The slider at event k shows exactly what a fold of the first k events draws: the same
  // nodes with the same label texts (an approach's score as it was then), the same
  // number of edges, the events listed by k; the header counts k events, and at the
  // last one says what the server wrote.
  const countsAtEnd = await page.textContent('#counts');
  // The picture's caption as the server drew it: the script's, at the last event, is the same.
  const drawnCaption = /<text class="sub caption"[^>]*>([^<]*)<\/text>/.exec(readFileSync(file, 'utf8'))[1];
  assertEqual(await page.textContent('#picture text.caption'), drawnCaption, `${name}: caption at the end`);
  const eventsCounted = (k) => `${k} ${Number(k) === 1 ? 'event' : 'events'}`;
  if (!countsAtEnd.endsWith(eventsCounted(expect.lastSeq))) fail(`${name}: counts ${countsAtEnd}`);
  for (const [k, want] of Object.entries(expect.at)) {
    await page.locator('#replay').fill(k);
    assertEqual(await shownNodes(page), want.nodes, `${name}: nodes shown at event ${k}`);
    assertEqual(await visibleSeqs(page, '#thoughts > li'), want.items, `${name}: events listed at event ${k}`);
    const edgesAt = expect.edges.filter((e) => Math.max(e.from, e.to) <= Number(k)).length;
    assertEqual((await visibleSeqs(page, '#picture path.edge')).length, edgesAt, `${name}: edges shown at event ${k}`);
    const label = await page.textContent('#replay-at');
    assertEqual(label, `event ${k} of ${expect.lastSeq}`, `${name}: slider label`);
    const counts = await page.textContent('#counts');
    if (!counts.endsWith(eventsCounted(k))) fail(`${name}: at event ${k} the header counts ${counts}`);
    const caption = await page.textContent('#picture text.caption');
    if (!caption.includes(` · at event ${k}`)) fail(`${name}: at event ${k} the caption says ${caption}`);
    const edgesWord = / (\d+) edges?/.exec(caption);
    const drawnEdges = (await page.$$eval('#picture path.edge', (els, at) => els
      .filter((e) => Number(e.getAttribute('data-seq')) <= at && ['next', 'branches_from', 'revises'].includes(e.getAttribute('data-edge'))).length, Number(k)));
    if (edgesWord && Number(edgesWord[1]) !== drawnEdges) fail(`${name}: at event ${k} the caption counts ${edgesWord[1]} edges, ${drawnEdges} are shown`);
  }
  const middle = Object.keys(expect.at)[Math.floor(Object.keys(expect.at).length / 2)];
  if (middle) {
    await page.locator('#replay').fill(middle);
    await page.screenshot({ path: join(shots, `${name}-at-${middle}.png`) });
  }
  await page.locator('#replay').fill(String(expect.lastSeq));
  assertEqual(await page.textContent('#counts'), countsAtEnd, `${name}: counts back at the end`);
  assertEqual(await page.textContent('#picture text.caption'), drawnCaption, `${name}: caption back at the end`);

  // The filter keeps the events whose text holds the query and dims the other nodes.
  if (expect.filter) {
    await page.locator('#filter').fill(expect.filter.query);
    assertEqual(await visibleSeqs(page, '#thoughts > li'), expect.filter.seqs, `${name}: filtered events`);
    const dimmed = await page.$$eval('#picture g.node.dim', (els) => els.length);
    assertEqual(dimmed, expect.filter.dimmed, `${name}: dimmed nodes`);
    await page.screenshot({ path: join(shots, `${name}-filtered.png`) });
    await page.locator('#filter').fill('');
  }

  // A node links to its event's item: the last thought's, and every family node's.
  const links = await page.$$eval('#picture g.node', (els) => els
    .filter((e) => e.classList.contains('extra')).map((e) => [e.id, Number(e.getAttribute('data-seq'))]));
  if (expect.thoughts.length > 0) links.push([`n${expect.thoughts[expect.thoughts.length - 1]}`, expect.thoughts[expect.thoughts.length - 1]]);
  for (const [id, seq] of links.slice(-12)) {
    // Click the node's box, not the group: a group's bounds include its label text, which
    // can run past the box (and past the picture pane's edge) with a machine's fonts.
    await page.locator(`#${id} > rect`).first().click();
    const hash = await page.evaluate(() => location.hash);
    assertEqual(hash, `#thought-${seq}`, `${name}: node link of ${id}`);
    if (!(await page.locator(`#thought-${seq}`).isVisible())) fail(`${name}: ${id} links to a hidden item`);
  }

  // A narrow window stacks the panes: the picture as wide as the window, the list below
  // it (screenshots at 800 and 400 px; 1,400 px above).
  for (const width of [800, 400]) {
    await page.setViewportSize({ width, height: 900 });
    const panes = await page.evaluate(() => {
      const box = (id) => document.getElementById(id).getBoundingClientRect();
      return { picture: box('picture-pane'), thoughts: box('thoughts-pane'), page: document.documentElement.clientWidth };
    });
    if (panes.picture.width < panes.page - 2) fail(`${name}: at ${width} px the picture pane is ${panes.picture.width} px of ${panes.page}`);
    if (panes.thoughts.top < panes.picture.bottom - 1) fail(`${name}: at ${width} px the list is beside the picture, not below it`);
    await page.screenshot({ path: join(shots, `${name}-${width}px.png`) });
  }
  await page.setViewportSize({ width: 1400, height: 900 });

  // Nothing ran, loaded or broke.
  const state = await page.evaluate(() => ({
    pwned: window.__pwned ?? null, title: document.title, violations: window.__violations,
    scripts: document.scripts.length, iframes: document.querySelectorAll('iframe,img,object,embed,link').length,
  }));
  if (state.pwned !== null || state.title === 'PWNED') fail(`${name}: a canary ran: ${JSON.stringify(state)}`);
  if (state.scripts !== 1) fail(`${name}: ${state.scripts} script elements`);
  if (state.iframes !== 0) fail(`${name}: ${state.iframes} embedded or linked elements`);
  if (state.violations.length) fail(`${name}: CSP violations ${state.violations.join('; ')}`);
  if (incidents.length) fail(`${name}: ${incidents.join('; ')}`);
  await page.close();
  return { name, loadMs, thoughts: expect.thoughts.length, nodes: expect.nodes.length };
}

async function pages(dir, shots) {
  const files = readdirSync(dir).filter((f) => f.endsWith('.html')).sort();
  if (files.length === 0) fail(`no pages in ${dir}: run cargo test first`);
  const browser = await launch();
  for (const file of files) {
    const result = await checkPage(browser, join(dir, file), shots);
    console.log(`browser-check: ${result.name}: ${result.thoughts} thoughts, ${result.nodes} nodes, loaded in ${result.loadMs} ms, counts, slider, filter, links and inertness as the projection says`);
  }
  await browser.close();
  console.log(`browser-check: ${files.length} pages checked; screenshots in ${shots}`);
}

/// Runs the server binary and records one thought through MCP over stdio (another process
/// than the `ui`).
function appendThought(bin, data, text, sessionId) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(bin, ['--data-dir', data, 'serve'], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { ...process.env, DISABLE_THOUGHT_LOGGING: 'true' },
    });
    children.add(child);
    child.on('exit', () => children.delete(child));
    let buffer = '';
    child.stdout.on('data', (chunk) => {
      buffer += chunk;
      for (const line of buffer.split('\n').slice(0, -1)) {
        const message = JSON.parse(line);
        if (message.id === 2) {
          child.stdin.end();
          if (message.error || message.result?.isError) reject(new Error(line));
          else resolvePromise(message.result.structuredContent ?? JSON.parse(message.result.content[0].text));
        }
      }
      buffer = buffer.slice(buffer.lastIndexOf('\n') + 1);
    });
    const send = (m) => child.stdin.write(`${JSON.stringify(m)}\n`);
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'browser-check', version: '1' } } });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'sequentialthinking', arguments: { thought: text, thoughtNumber: sessionId ? 2 : 1, totalThoughts: 2, nextThoughtNeeded: true, ...(sessionId ? { sessionId } : {}) } } });
    child.on('error', reject);
  });
}

async function ui(bin, data, shots) {
  const first = await appendThought(bin, data, 'first thought, before the ui <img src=x onerror="window.__pwned=1">');
  const server = spawn(bin, ['--data-dir', data, 'ui', '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.add(server);
  const { base, address } = await new Promise((resolvePromise, reject) => {
    let out = '';
    server.stdout.on('data', (chunk) => {
      out += chunk;
      // The address carries this run's key: the first page sets the cookie the rest use.
      const match = /(http:\/\/127\.0\.0\.1:\d+\/)\?key=[0-9a-f]+/.exec(out);
      if (match) resolvePromise({ base: match[1], address: match[0] });
    });
    server.on('exit', (code) => reject(new Error(`ui exited ${code}`)));
    setTimeout(() => reject(new Error('ui printed no address in 20 s')), 20000);
  });
  const origin = base.slice(0, -1);
  const browser = await launch();
  try {
    const { page, incidents } = await guardedPage(browser, (u) => u.startsWith(origin));
    // Without the key: 401, and nothing of the ledger.
    const refused = await page.goto(base, { waitUntil: 'load' });
    assertEqual(refused.status(), 401, 'ui: without the key');
    if ((await page.content()).includes(first.sessionId)) fail('ui: a page without the key shows the ledger');
    await page.goto(address, { waitUntil: 'load' });
    await page.waitForSelector(`a[href="/sessions/${first.sessionId}"]`, { timeout: 10000 });
    // The session list's search.
    // The session list's search: the server's ranked matches in place of the list.
    await page.locator('#search').fill('before');
    await page.waitForSelector(`#results a[href="/sessions/${first.sessionId}#thought-2"]`, { timeout: 10000 });
    if (!(await page.textContent('#results .snippet')).includes('<img')) fail('ui: the snippet is not shown as text');
    await page.screenshot({ path: join(shots, 'ui-search.png') });
    await page.locator('#search').fill('"unclosed');
    await page.waitForSelector('#results .error', { timeout: 10000 });
    if (!(await page.textContent('#results .error')).includes('never closed')) fail('ui: a query error is not the CLI message');
    await page.locator('#search').fill('no such text anywhere');
    await page.waitForSelector('#results li.none', { timeout: 10000 });
    assertEqual(await page.$$eval('#sessions li:not(.filtered)', (e) => e.length), 0, 'ui: search hides the list');
    await page.locator('#search').fill('');
    await page.waitForSelector('#results', { state: 'hidden', timeout: 10000 });
    await page.screenshot({ path: join(shots, 'ui-list.png') });
    await page.click(`a[href="/sessions/${first.sessionId}"]`);
    await page.waitForSelector('#picture g.node[data-seq="2"]');
    await page.evaluate(() => { window.__sameDocument = true; });
    // Another process appends: the page shows it without a reload.
    const appended = 'appended by another process while the page was open';
    const second = await appendThought(bin, data, appended, first.sessionId);
    assertEqual(second.sessionId, first.sessionId, 'ui: the second thought continues the session');
    await page.waitForSelector('#picture g.node[data-seq="3"]', { timeout: 15000 });
    const text = await page.textContent('#thoughts');
    if (!text.includes(appended)) fail('ui: the appended thought is not listed');
    const same = await page.evaluate(() => window.__sameDocument === true);
    if (!same) fail('ui: the page reloaded');
    const state = await page.evaluate(() => ({ pwned: window.__pwned ?? null, violations: window.__violations }));
    if (state.pwned !== null) fail('ui: a canary ran');
    if (state.violations.length) fail(`ui: CSP violations ${state.violations.join('; ')}`);
    if (incidents.length) fail(`ui: ${incidents.join('; ')}`);
    await page.screenshot({ path: join(shots, 'ui-session-live.png') });
    // The list updates too: a new session recorded by another process appears.
    await page.click('a[href="/"]');
    await page.waitForSelector('#sessions > li');
    await page.evaluate(() => { window.__sameDocument = true; });
    const third = await appendThought(bin, data, 'a new session from another process');
    await page.waitForSelector(`a[href="/sessions/${third.sessionId}"]`, { timeout: 15000 });
    if (!(await page.evaluate(() => window.__sameDocument === true))) fail('ui: the list reloaded');
    assertEqual(await page.$$eval('#sessions > li', (e) => e.length), 2, 'ui: sessions listed after the new one');
    await page.screenshot({ path: join(shots, 'ui-list-live.png') });
    console.log(`browser-check: ui at ${base}: list, ranked search, session page, a thought and a session appended by another process shown without a reload`);
  } finally {
    await browser.close();
    server.kill();
  }
}

async function paint(file, shots) {
  const url = pathToFileURL(resolve(file)).href;
  const browser = await launch();
  const runs = [];
  for (let i = 0; i < 5; i++) {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(url, { waitUntil: 'load', timeout: 120000 });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 120000 });
    runs.push(await page.evaluate(() => {
      const paint = performance.getEntriesByName('first-contentful-paint')[0];
      const nav = performance.getEntriesByType('navigation')[0];
      return {
        firstPaintMs: paint ? paint.startTime : null,
        loadMs: nav.loadEventEnd,
        nodes: document.querySelectorAll('#picture g.node').length,
      };
    }));
    if (i === 0) await page.screenshot({ path: join(shots, 'paint.png') });
    await page.close();
  }
  await browser.close();
  const median = (key) => runs.map((r) => r[key]).sort((a, b) => a - b)[2];
  console.log(`paint: ${file}: ${runs[0].nodes} nodes; first contentful paint ${median('firstPaintMs').toFixed(0)} ms, load event ${median('loadMs').toFixed(0)} ms (median of 5; chromium ${CHROMIUM})`);
}

const [mode, ...rest] = process.argv.slice(2);
const shots = rest[rest.length - 1];
if (shots) mkdirSync(shots, { recursive: true });
try {
  if (mode === 'pages' && rest.length === 2) await pages(rest[0], shots);
  else if (mode === 'paint' && rest.length === 2) await paint(rest[0], shots);
  else if (mode === 'ui' && rest.length === 3) await ui(rest[0], rest[1], shots);
  else fail('usage: check.mjs pages DIR SHOTS | check.mjs paint FILE SHOTS | check.mjs ui BIN DATA SHOTS');
} catch (error) {
  fail(error.stack || String(error));
}
