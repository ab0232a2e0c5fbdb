
(function () {
  'use strict';
  var PROTOCOL = '2026-01-26';
  var DRAW = 'draw_session';
  var FOLLOW_RETRY_MS = 5000;
  var nextId = 1;
  var pending = {};
  var session = null;
  var lastSeq = 0;
  var generation = 0;
  var following = false;
  var askedAt = null;
  function byId(id) { return document.getElementById(id); }
  function send(message) { window.parent.postMessage(message, '*'); }
  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      send({ jsonrpc: '2.0', id: id, method: method, params: params });
    });
  }
  function notify(method, params) { send({ jsonrpc: '2.0', method: method, params: params || {} }); }
  function status(text) {
    var line = byId('status');
    if (!line) {
      line = document.createElement('p');
      line.id = 'status';
      line.className = 'meta';
      byId('content').insertBefore(line, byId('content').firstChild);
    }
    line.textContent = text;
  }
  function applyContext(context) {
    if (!context) { return; }
    var root = document.documentElement;
    if (context.theme === 'dark' || context.theme === 'light') {
      root.setAttribute('data-theme', context.theme);
    }
    var variables = context.styles && context.styles.variables;
    if (variables) {
      Object.keys(variables).forEach(function (name) {
        if (/^--[a-z0-9-]+$/.test(name) && typeof variables[name] === 'string') {
          root.style.setProperty(name, variables[name]);
        }
      });
    }
  }
  function keep() {
    var slider = byId('replay');
    var filter = byId('filter');
    return {
      atEnd: !slider || slider.value === slider.max,
      k: slider ? slider.value : null,
      query: filter ? filter.value : '',
      scroll: ['picture-pane', 'thoughts-pane'].map(function (id) {
        var pane = byId(id);
        return pane ? pane.scrollTop : 0;
      })
    };
  }
  function restore(kept) {
    var slider = byId('replay');
    if (slider && !kept.atEnd) { slider.value = kept.k; }
    if (slider && askedAt !== null) { slider.value = String(askedAt); askedAt = null; }
    var filter = byId('filter');
    if (filter) { filter.value = kept.query; }
    ['picture-pane', 'thoughts-pane'].forEach(function (id, i) {
      var pane = byId(id);
      if (pane) { pane.scrollTop = kept.scroll[i]; }
    });
  }
  function fit() {
    var pane = byId('picture-pane');
    var picture = byId('picture');
    if (!pane || !picture) { return; }
    var natural = Number(picture.getAttribute('width'));
    pane.classList.toggle('fit', natural > pane.clientWidth && natural < pane.clientWidth * 1.8);
  }
  function render(drawn) {
    if (!drawn || typeof drawn.html !== 'string') { return; }
    var kept = keep();
    byId('content').innerHTML = drawn.html;
    restore(kept);
    lastSeq = Number(drawn.lastSeq) || 0;
    document.body.setAttribute('data-session', String(drawn.sessionId));
    document.body.setAttribute('data-last-seq', String(lastSeq));
    fit();
    document.dispatchEvent(new Event('ledger:refreshed'));
  }
  function draw(args) {
    return request('tools/call', { name: DRAW, arguments: args }).then(function (result) {
      if (result && result.isError) {
        var text = (result.content || []).map(function (c) { return c.text || ''; }).join(' ');
        throw new Error(text);
      }
      return result ? result.structuredContent : null;
    });
  }
  function follow(mine) {
    if (following) { return; }
    following = true;
    (function next() {
      if (mine !== generation) { following = false; return; }
      draw({ sessionId: session, afterSeq: lastSeq }).then(function (drawn) {
        if (mine === generation && drawn && !drawn.unchanged && Number(drawn.lastSeq) > lastSeq) {
          render(drawn);
        }
        next();
      }, function () { setTimeout(next, FOLLOW_RETRY_MS); });
    })();
  }
  function onResult(result) {
    var data = (result && result.structuredContent) || {};
    var id = data.sessionId || data.ledgerId;
    if (result && result.isError || typeof id !== 'string') {
      var text = ((result && result.content) || []).map(function (c) { return c.text || ''; }).join(' ');
      status(text || 'This result names no session.');
      return;
    }
    if (id !== session) {
      session = id;
      generation++;
      following = false;
      lastSeq = 0;
    }
    if (typeof data.atSeq === 'number' && data.atSeq < (data.headSeq || 0)) { askedAt = data.atSeq; }
    var mine = generation;
    draw({ sessionId: id }).then(function (drawn) {
      if (mine === generation) { render(drawn); follow(mine); }
    }, function (error) { status('The session could not be drawn: ' + error.message); });
  }
  function answer(message, result) { send({ jsonrpc: '2.0', id: message.id, result: result }); }
  window.addEventListener('message', function (event) {
    if (event.source !== window.parent) { return; }
    var message = event.data;
    if (!message || message.jsonrpc !== '2.0') { return; }
    if (message.method === undefined) {
      var waiting = pending[message.id];
      if (!waiting) { return; }
      delete pending[message.id];
      if (message.error) { waiting.reject(new Error(message.error.message || 'error')); }
      else { waiting.resolve(message.result); }
      return;
    }
    switch (message.method) {
      case 'ui/notifications/tool-result': onResult(message.params); break;
      case 'ui/notifications/host-context-changed': applyContext(message.params); break;
      case 'ui/notifications/tool-cancelled': status('The tool call was cancelled.'); break;
      case 'ui/resource-teardown': generation++; answer(message, {}); break;
      case 'ping': answer(message, {}); break;
      default:
        if (message.id !== undefined) {
          send({ jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'Method not found' } });
        }
    }
  });
  document.addEventListener('click', function (event) {
    var link = event.target.closest ? event.target.closest('a') : null;
    if (!link) { return; }
    var href = link.getAttribute('href') || '';
    event.preventDefault();
    if (href.charAt(0) !== '#') { return; }
    var target = byId(href.slice(1));
    if (!target) { return; }
    var picked = document.querySelectorAll('.picked');
    for (var i = 0; i < picked.length; i++) { picked[i].classList.remove('picked'); }
    target.classList.add('picked');
    target.scrollIntoView({ block: 'nearest' });
  });
  if (window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches) {
    document.documentElement.setAttribute('data-theme', 'dark');
  }
  var lastSize = '';
  function reportSize() {
    var width = Math.ceil(document.documentElement.scrollWidth);
    var height = Math.ceil(document.documentElement.scrollHeight);
    var size = width + 'x' + height;
    if (size !== lastSize) { lastSize = size; notify('ui/notifications/size-changed', { width: width, height: height }); }
  }
  window.addEventListener('resize', fit);
  request('ui/initialize', {
    appInfo: { name: 'reasoning-ledger', version: '1' },
    appCapabilities: { availableDisplayModes: ['inline'] },
    protocolVersion: PROTOCOL
  }).then(function (initialized) {
    applyContext(initialized && initialized.hostContext);
    notify('ui/notifications/initialized', {});
    if (window.ResizeObserver) { new ResizeObserver(reportSize).observe(document.body); }
    reportSize();
  }, function (error) { status('The host did not start the app: ' + error.message); });
})();
