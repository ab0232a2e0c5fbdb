#!/usr/bin/env node
// Parses Mermaid diagrams with the real `mermaid` library (in Node, over a jsdom window)
// and reports, per input, whether it parsed and how many nodes, edges and subgraphs
// the parser's flowchart db holds, so a caller can compare them with the projection.
//
// Setup (once; node_modules is not committed):
//   npm ci --prefix tools/mermaid-check
// mermaid 12 declares Node >= 22.12; on Node 20 npm warns (EBADENGINE) and parsing works.
//
// Usage:
//   node tools/mermaid-check/check.mjs [options] [FILE ...]     (no FILE, or "-": stdin)
//
// Options:
//   --max-edges N       Mermaid's maxEdges (default: Mermaid's own, 500). A flowchart
//                       with more edges fails to parse unless this is raised, exactly as
//                       in a browser with the default config.
//   --max-text-size N   Mermaid's maxTextSize (default: Mermaid's own, 50000). Parsing
//                       ignores it; a diagram over it is reported with "overMaxTextSize"
//                       (a default renderer would draw an error box instead).
//   --no-raw-html       Also fail when a parsed label still holds markup other than the
//                       renderer's own "<br/>" (an escaping bug would show up here).
//   -h, --help          This text.
//
// Output: one JSON object per input on stdout, e.g.
//   {"file":"a.mmd","ok":true,"type":"flowchart-v2","nodes":3,"thoughtNodes":3,
//    "edges":2,"subgraphs":1,"chars":812,"overMaxTextSize":false}
// "thoughtNodes" counts vertices whose id is t<digits> (reasoning-ledger's thought ids).
// On a failure the object has "ok":false and "error", the error also goes to stderr.
// Exit code: 0 all parsed, 1 any failed, 2 usage error.
// Time: ~2.5 s to load mermaid, then about 3 ms per node for small diagrams; a
// 10,000-thought export takes ~30 s (Mermaid's own sanitizing of each label dominates).

import { readFileSync } from 'node:fs';
import { JSDOM } from 'jsdom';

/** The leading comment block of this file. */
const USAGE = readFileSync(new URL(import.meta.url), 'utf8')
  .split('\n')
  .slice(1)
  .filter((line, i, lines) => lines.slice(0, i + 1).every((l) => l.startsWith('//')))
  .map((line) => line.replace(/^\/\/ ?/, ''))
  .join('\n');

function parseArgs(argv) {
  const options = { maxEdges: undefined, maxTextSize: undefined, noRawHtml: false, files: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const number = () => {
      const value = Number(argv[++i]);
      if (!Number.isInteger(value) || value <= 0) {
        throw new Error(`${arg} needs a positive integer`);
      }
      return value;
    };
    if (arg === '-h' || arg === '--help') {
      options.help = true;
    } else if (arg === '--max-edges') {
      options.maxEdges = number();
    } else if (arg === '--max-text-size') {
      options.maxTextSize = number();
    } else if (arg === '--no-raw-html') {
      options.noRawHtml = true;
    } else if (arg.startsWith('--')) {
      throw new Error(`unknown option ${arg}`);
    } else {
      options.files.push(arg);
    }
  }
  if (options.files.length === 0) options.files.push('-');
  return options;
}

let options;
try {
  options = parseArgs(process.argv.slice(2));
} catch (error) {
  console.error(`mermaid-check: ${error.message}\n\n${USAGE}`);
  process.exit(2);
}
if (options.help) {
  console.log(USAGE);
  process.exit(0);
}

// Mermaid sanitizes labels with DOMPurify, which needs a window; give it jsdom's before
// mermaid is loaded (DOMPurify binds to the global window when imported). jsdom is pinned
// to 26: 27's selector engine adds a window listener for every document DOMPurify parses
// (one per label), which makes a parse quadratic (1,000 nodes: 20 s instead of 3 s).
const dom = new JSDOM('<!doctype html><html><body></body></html>');
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import('mermaid');

const config = { startOnLoad: false, securityLevel: 'strict', logLevel: 'fatal' };
if (options.maxEdges !== undefined) config.maxEdges = options.maxEdges;
if (options.maxTextSize !== undefined) config.maxTextSize = options.maxTextSize;
mermaid.initialize(config);
const maxTextSize = mermaid.mermaidAPI.getConfig().maxTextSize ?? 50000;

/** Whether a parsed label (after Mermaid's own sanitizing) still holds a tag other than
 * the renderer's line break. */
function rawMarkup(text) {
  if (typeof text !== 'string') return false;
  return /[<>]/.test(text.replace(/<br\s*\/?>/gi, ''));
}

async function check(name, text) {
  const result = { file: name };
  try {
    const diagram = await mermaid.mermaidAPI.getDiagramFromText(text);
    result.ok = true;
    result.type = diagram.type;
    const db = diagram.db;
    if (typeof db.getVertices === 'function') {
      const vertices = [...db.getVertices().values()];
      const edges = db.getEdges();
      const subgraphs = typeof db.getSubGraphs === 'function' ? db.getSubGraphs() : [];
      result.nodes = vertices.length;
      result.thoughtNodes = vertices.filter((v) => /^t\d+$/.test(v.id)).length;
      result.edges = edges.length;
      result.subgraphs = subgraphs.length;
      if (options.noRawHtml) {
        const labels = [
          ...vertices.map((v) => v.text),
          ...edges.map((e) => e.text),
          ...subgraphs.map((s) => s.title),
        ];
        const bad = labels.filter(rawMarkup);
        if (bad.length > 0) {
          result.ok = false;
          result.error = `raw markup left in ${bad.length} label(s), first: ${JSON.stringify(bad[0])}`;
        }
      }
    }
  } catch (error) {
    result.ok = false;
    result.error = String(error?.message ?? error);
  }
  result.chars = text.length;
  result.overMaxTextSize = text.length > maxTextSize;
  return result;
}

let failed = 0;
for (const file of options.files) {
  let text;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (error) {
    console.error(`mermaid-check: cannot read ${file}: ${error.message}`);
    process.exit(2);
  }
  const result = await check(file === '-' ? '<stdin>' : file, text);
  console.log(JSON.stringify(result));
  if (!result.ok) {
    failed++;
    console.error(`mermaid-check: ${result.file}: ${result.error}`);
  }
}
process.exit(failed > 0 ? 1 : 0);
