// The host page's script (bundled by esbuild into the page check.mjs serves): an MCP
// client of the SDK (over streamable HTTP at this page's /mcp, or over stdio through the
// Node side's bridge: window.__toServer / window.__fromServer) that declares MCP Apps,
// and for each tool call whose tool names a ui:// resource, the app in a sandboxed
// iframe driven by ext-apps's AppBridge (tool input once, then every result). Tools whose
// visibility leaves out "model" are kept from `modelTools`, as the spec asks of hosts.
import { AppBridge, PostMessageTransport } from '@modelcontextprotocol/ext-apps/app-bridge';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const MIME = 'text/html;profile=mcp-app';
const EXTENSION = 'io.modelcontextprotocol/ui';
// The spec's default for a resource that declares no `csp` (no connection at all).
const DEFAULT_CSP = "default-src 'none'; script-src 'self' 'unsafe-inline'; " +
  "style-src 'self' 'unsafe-inline'; img-src 'self' data:; media-src 'self' data:; connect-src 'none'";

// Stdio through the Node side: each JSON-RPC message one line of the server's stdin/stdout.
// Each channel is a `serve` process of its own (on one data directory).
class BridgedStdio {
  constructor(channel) { this.channel = channel; }
  async start() {
    window.__fromServer ||= {};
    window.__fromServer[this.channel] = (line) => this.onmessage?.(JSON.parse(line));
  }
  async send(message) { await window.__toServer(this.channel, JSON.stringify(message)); }
  async close() { this.onclose?.(); }
}

const state = { client: null, tools: [], view: null, theme: 'light', log: [] };

function visibleToModel(tool) {
  const visibility = tool._meta?.ui?.visibility;
  return !Array.isArray(visibility) || visibility.includes('model');
}

async function connect(kind, declare) {
  const capabilities = declare ? { extensions: { [EXTENSION]: { mimeTypes: [MIME] } } } : {};
  const client = new Client({ name: 'apps-check-host', version: '1.0.0' }, { capabilities });
  const transport = kind === 'http'
    ? new StreamableHTTPClientTransport(new URL('/mcp', location.href), {
      requestInit: { headers: { authorization: `Bearer ${window.__token}` } },
    })
    : new BridgedStdio(declare ? 'app' : 'plain');
  await client.connect(transport);
  return client;
}

async function listTools(client) {
  return (await client.listTools()).tools;
}

async function openView(uri, toolName, args) {
  const read = await state.client.readResource({ uri });
  const content = read.contents[0];
  if (content.mimeType !== MIME) throw new Error(`resource ${uri} is ${content.mimeType}`);
  const html = content.text.replace('<head>', `<head><meta http-equiv="Content-Security-Policy" content="${DEFAULT_CSP}">`);
  const frame = document.createElement('iframe');
  frame.id = 'app';
  frame.setAttribute('sandbox', 'allow-scripts');
  frame.srcdoc = html;
  document.getElementById('views').replaceChildren(frame);
  const bridge = new AppBridge(state.client, { name: 'apps-check-host', version: '1.0.0' },
    { serverTools: {}, serverResources: {}, logging: {} },
    { hostContext: { theme: state.theme, displayMode: 'inline', platform: 'web',
      containerDimensions: { width: frame.clientWidth, maxHeight: 2000 } } });
  bridge.onsizechange = ({ height }) => { if (height) frame.style.height = `${height}px`; };
  bridge.onloggingmessage = (params) => state.log.push(params);
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  await initialized;
  await bridge.sendToolInput({ arguments: args });
  state.view = { uri, bridge, frame, toolName };
  return state.view;
}

window.host = {
  async start(kind) {
    state.client = await connect(kind, true);
    state.tools = await listTools(state.client);
    const plain = await connect(kind, false);
    const plainTools = await listTools(plain);
    await plain.close();
    return {
      modelTools: state.tools.filter(visibleToModel).map((t) => t.name),
      appTools: state.tools.filter((t) => !visibleToModel(t)).map((t) => t.name),
      linked: state.tools.filter((t) => t._meta?.ui?.resourceUri).map((t) => [t.name, t._meta.ui.resourceUri]),
      plainTools: plainTools.map((t) => t.name),
      plainMetas: plainTools.filter((t) => t._meta !== undefined).length,
      resources: (await state.client.listResources()).resources.map((r) => [r.uri, r.mimeType]),
    };
  },
  // Calls a tool as the model would (only tools it may see); the result goes to the open
  // view of the tool's resource, or to a new one.
  async call(name, args) {
    const tool = state.tools.find((t) => t.name === name);
    if (!tool || !visibleToModel(tool)) throw new Error(`the model has no tool ${name}`);
    const result = await state.client.callTool({ name, arguments: args });
    const uri = tool._meta?.ui?.resourceUri;
    if (uri) {
      const view = state.view?.uri === uri ? state.view : await openView(uri, name, args);
      await view.bridge.sendToolResult(result);
    }
    return result;
  },
  // A call the model may make that opens no view (the export to compare with).
  async callPlain(name, args) { return state.client.callTool({ name, arguments: args }); },
  async theme(theme) {
    state.theme = theme;
    await state.view?.bridge.setHostContext({ theme });
  },
  width(px) { document.getElementById('views').style.width = `${px}px`; },
  log() { return state.log; },
};
document.body.setAttribute('data-host-ready', '1');
