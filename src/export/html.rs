//! One self-contained HTML page of a session: the picture ([`super::svg`]), the thoughts
//! in order with their metadata, a replay slider from the first event to the last, a text
//! filter, and links from each node to its thought (and back).
//!
//! Owns: the page, its constant stylesheet and script, and its Content-Security-Policy
//! (`default-src 'none'`, the one stylesheet and the one script allowed by their sha256,
//! nothing fetched, no form, no base). Must not: put ledger text anywhere but escaped
//! ([`super::svg::escape_xml`]) inside an element's text or a quoted attribute, write an
//! inline event handler or a `style` attribute, or reference anything outside the file.
//!
//! The list holds one item per event that drew something: each thought, and each of the
//! families' nodes whose event is no thought (plan approaches, evaluations…), with its
//! metadata and the details the families add ([`crate::export::picture`]); an item whose
//! event names who wrote it carries `data-actor` and `by NAME` in its meta line.
//!
//! The script reads only the DOM: every element of the picture and every listed event
//! carries `data-seq` (the event that recorded it); the slider at event k hides those with
//! a seq above k, and the parts of labels carrying `data-until` replaced by event k, so
//! the page shows the tree as it stood after event k. `#at=K` in the address opens the
//! page at event K. The filter hides the listed events whose text lacks the query and
//! dims their nodes (every node of that event).

use crate::event::format_time;
use crate::export::counted;
use crate::export::family::Exports;
use crate::export::picture::{Entry, Mark, Node, Picture};
use crate::export::svg::{self, escape_xml_into, node_kind, push_actor};
use crate::projection::tree::{Anomaly, ThoughtNode, ThoughtTree};
use sha2::{Digest, Sha256};
use std::fmt::Write as _;

/// The page's script: constant; reads the DOM afresh on every change (so the `ui` can
/// replace the content under it) and changes only classes and the two outputs.
pub(crate) const SCRIPT: &str = r#"
(function () {
  'use strict';
  function byId(id) { return document.getElementById(id); }
  function replay() {
    var slider = byId('replay');
    if (!slider) { return; }
    var k = Number(slider.value);
    var timed = document.querySelectorAll('main [data-seq]');
    for (var i = 0; i < timed.length; i++) {
      var seq = Number(timed[i].getAttribute('data-seq'));
      timed[i].classList.toggle('later', seq > k);
      var until = timed[i].getAttribute('data-until');
      if (until !== null) { timed[i].classList.toggle('was', k >= Number(until)); }
    }
    byId('replay-at').textContent = 'event ' + k + ' of ' + slider.max;
    counts(k);
    document.body.setAttribute('data-replay-at', String(k));
  }
  function counted(n, one, many) { return n + ' ' + (n === 1 ? one : many); }
  function shownBy(selector, k) {
    var all = document.querySelectorAll(selector);
    var n = 0;
    for (var i = 0; i < all.length; i++) {
      if (Number(all[i].getAttribute('data-seq')) <= k) { n++; }
    }
    return n;
  }
  function counts(k) {
    var span = byId('counts');
    if (!span) { return; }
    var parts = [];
    var branches = span.getAttribute('data-branch-seqs');
    if (branches !== null) {
      var firsts = branches.split(' ').filter(function (s) { return s !== '' && Number(s) <= k; });
      parts.push(counted(shownBy('#thoughts > li:not(.event)', k), 'thought', 'thoughts'));
      parts.push(counted(firsts.length, 'branch', 'branches'));
    }
    if (span.hasAttribute('data-nodes')) {
      parts.push(counted(shownBy('#picture g.node.extra', k), 'node', 'nodes'));
    }
    parts.push(counted(k, 'event', 'events'));
    span.textContent = parts.join(' · ');
    caption(k);
  }
  function caption(k) {
    var text = document.querySelector('#picture text.caption');
    var span = byId('counts');
    if (!text || !span) { return; }
    var edges = 0;
    var links = 0;
    var drawn = document.querySelectorAll('#picture path.edge');
    for (var i = 0; i < drawn.length; i++) {
      if (Number(drawn[i].getAttribute('data-seq')) > k) { continue; }
      var kind = drawn[i].getAttribute('data-edge');
      if (kind === 'next' || kind === 'branches_from' || kind === 'revises') { edges++; } else { links++; }
    }
    var parts = [text.getAttribute('data-session-kind') + ' · at event ' + k];
    if (text.hasAttribute('data-thoughts')) {
      var firsts = (span.getAttribute('data-branch-seqs') || '').split(' ')
        .filter(function (s) { return s !== '' && Number(s) <= k; });
      parts.push(counted(shownBy('#thoughts > li:not(.event)', k), 'thought', 'thoughts'));
      parts.push(counted(edges, 'edge', 'edges'));
      parts.push(counted(firsts.length, 'branch', 'branches'));
    }
    var node = text.getAttribute('data-nodes');
    if (node !== null) {
      parts.push(counted(shownBy('#picture g.node.extra', k), node, node + 's'));
      parts.push(counted(links, 'link', 'links'));
    }
    text.textContent = parts.join(' · ') + text.getAttribute('data-anomalies');
  }
  function applyFilter() {
    var filter = byId('filter');
    if (!filter) { return; }
    var query = filter.value.trim().toLowerCase();
    var items = document.querySelectorAll('#thoughts > li');
    var nodes = {};
    var drawn = document.querySelectorAll('#picture g.node');
    for (var j = 0; j < drawn.length; j++) {
      var at = drawn[j].getAttribute('data-seq');
      (nodes[at] = nodes[at] || []).push(drawn[j]);
    }
    var shown = 0;
    for (var i = 0; i < items.length; i++) {
      var li = items[i];
      var hit = query === '' || li.textContent.toLowerCase().indexOf(query) >= 0;
      li.classList.toggle('filtered', !hit);
      var mine = nodes[li.getAttribute('data-seq')] || [];
      for (var n = 0; n < mine.length; n++) { mine[n].classList.toggle('dim', !hit); }
      if (hit) { shown++; }
    }
    byId('filter-count').textContent =
      query === '' ? '' : shown + ' of ' + items.length + ' events';
  }
  function fromAddress() {
    var match = /^#at=(\d+)$/.exec(location.hash);
    if (match && byId('replay')) { byId('replay').value = match[1]; }
    replay();
  }
  document.addEventListener('input', function (event) {
    if (event.target.id === 'replay') { replay(); }
    if (event.target.id === 'filter') { applyFilter(); }
  });
  document.addEventListener('ledger:refreshed', function () { replay(); applyFilter(); });
  window.addEventListener('hashchange', fromAddress);
  fromAddress();
  document.body.setAttribute('data-ready', '1');
})();
"#;

/// The `ui`'s script: waits for a commit after the page's ledger position (a long poll of
/// `/changes`), then fetches the page's content again and puts it in place, keeping the
/// slider (at the end if it was), the filter and the scroll positions.
pub(crate) const LIVE_SCRIPT: &str = r#"
(function () {
  'use strict';
  var position = Number(document.body.getAttribute('data-position'));
  function keep() {
    var slider = document.getElementById('replay');
    var filter = document.getElementById('filter') || document.getElementById('search');
    return {
      atEnd: !slider || slider.value === slider.max,
      k: slider ? slider.value : null,
      query: filter ? filter.value : '',
      scroll: ['picture-pane', 'thoughts-pane'].map(function (id) {
        var pane = document.getElementById(id);
        return pane ? pane.scrollTop : 0;
      })
    };
  }
  function restore(kept) {
    var slider = document.getElementById('replay');
    if (slider && !kept.atEnd) { slider.value = kept.k; }
    var filter = document.getElementById('filter') || document.getElementById('search');
    if (filter) { filter.value = kept.query; }
    ['picture-pane', 'thoughts-pane'].forEach(function (id, i) {
      var pane = document.getElementById(id);
      if (pane) { pane.scrollTop = kept.scroll[i]; }
    });
  }
  function refresh() {
    return fetch(location.pathname + '?part=content', { cache: 'no-store' })
      .then(function (response) {
        if (!response.ok) { throw new Error('HTTP ' + response.status); }
        return response.text();
      })
      .then(function (html) {
        var kept = keep();
        document.getElementById('content').innerHTML = html;
        restore(kept);
        document.dispatchEvent(new Event('ledger:refreshed'));
        document.body.setAttribute('data-position', String(position));
      });
  }
  function poll() {
    fetch('/changes?after=' + position, { cache: 'no-store' })
      .then(function (response) { return response.text(); })
      .then(function (text) {
        var next = Number(text);
        if (next > position) { position = next; return refresh(); }
      })
      .then(poll, function () { setTimeout(poll, 2000); });
  }
  poll();
})();
"#;

/// The page's own rules (the picture's are [`svg::stylesheet`]). On a window narrower
/// than 900 px the two panes stack, the picture above the list, each as wide as the
/// window (beside the 320 px list, a picture would get less than two thirds of it).
const PAGE_CSS: &str = "\
body{margin:0;font:14px/1.4 system-ui,sans-serif;color:#212529;background:#fff}\
header{position:sticky;top:0;z-index:1;background:#f8f9fa;border-bottom:1px solid #dee2e6;padding:8px 16px}\
h1{font-size:18px;margin:0 0 4px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}\
.meta{color:#495057;font-size:12px}\
.controls{display:flex;flex-wrap:wrap;gap:16px;align-items:center;margin-top:6px}\
#replay{width:320px}\
main{display:flex;align-items:flex-start}\
#picture-pane{flex:0 1 auto;max-width:calc(100% - 320px);overflow:auto;max-height:calc(100vh - 100px);border-right:1px solid #dee2e6}\
#thoughts-pane{flex:1 1 320px;min-width:320px;overflow:auto;max-height:calc(100vh - 100px);padding:0 12px}\
#thoughts{list-style:none;padding:0;margin:8px 0}\
#thoughts li{border:1px solid #dee2e6;border-radius:6px;padding:6px 8px;margin:6px 0}\
#thoughts li:target{outline:3px solid #7048e8}\
#thoughts li.later,#thoughts li.filtered{display:none}\
#thoughts .k-revision{background:#fff4e6}#thoughts .k-branch{background:#ebfbee}#thoughts .k-think{background:#e7f5ff}\
#thoughts li.event{border-left:4px solid #7048e8}\
#thoughts pre{white-space:pre-wrap;overflow-wrap:anywhere;font:13px/1.4 ui-monospace,monospace;margin:4px 0 0}\
g.node:target rect{stroke:#7048e8;stroke-width:3}\
a{color:#1c7ed6}\
@media (max-width:900px){main{display:block}\
#picture-pane{max-width:none;max-height:none;border-right:0;border-bottom:1px solid #dee2e6}\
#thoughts-pane{min-width:0;max-height:none}h1{white-space:normal}#replay{width:100%}}";

/// The whole stylesheet of the page (the picture's kinds: those of `exports`).
pub(crate) fn page_stylesheet(exports: &Exports) -> String {
    format!("{PAGE_CSS}{}", svg::stylesheet(exports))
}

/// `'sha256-…'` of `text`, as a CSP source.
fn csp_hash(text: &str) -> String {
    format!("'sha256-{}'", base64(&Sha256::digest(text.as_bytes())))
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    use ::base64::Engine as _;
    ::base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The Content-Security-Policy of a page whose one stylesheet is `css` and whose scripts
/// are `scripts`: nothing else may load or run; `connect` allows fetching from the page's
/// own origin (the `ui`'s live updates).
pub(crate) fn content_security_policy(css: &str, scripts: &[&str], connect: bool) -> String {
    let hashes: Vec<String> = scripts.iter().map(|script| csp_hash(script)).collect();
    format!(
        "default-src 'none'; style-src {}; script-src {}; img-src 'none'; base-uri 'none'; \
         form-action 'none'{}",
        csp_hash(css),
        hashes.join(" "),
        if connect { "; connect-src 'self'" } else { "" }
    )
}

/// The head of a page up to `<body`: charset, policy, title, the one stylesheet.
pub(crate) fn head_into(out: &mut String, title: &str, css: &str, scripts: &[&str], connect: bool) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n<title>",
        content_security_policy(css, scripts, connect)
    );
    escape_xml_into(out, title);
    out.push_str(" · reasoning-ledger</title>\n<style>");
    out.push_str(css);
    out.push_str("</style>\n</head>\n");
}

/// The page's scripts and the end of the page.
pub(crate) fn tail_into(out: &mut String, scripts: &[&str]) {
    for script in scripts {
        out.push_str("<script>");
        out.push_str(script);
        out.push_str("</script>\n");
    }
    out.push_str("</body>\n</html>\n");
}

/// Renders the page of `tree` (the `html` export: offline, nothing fetched), with what
/// the families of `exports` add to it.
pub fn render(tree: &ThoughtTree, exports: &Exports) -> String {
    page(tree, None, exports)
}

/// The page of `tree`; `live`: the ledger position it shows, for the `ui` (a link back to
/// the list, and [`LIVE_SCRIPT`] updating it when the ledger changes).
pub(crate) fn page(tree: &ThoughtTree, live: Option<u64>, exports: &Exports) -> String {
    let css = page_stylesheet(exports);
    let scripts: &[&str] = if live.is_some() {
        &[SCRIPT, LIVE_SCRIPT]
    } else {
        &[SCRIPT]
    };
    let mut out = String::with_capacity(4096 + tree.order.len() * 1500);
    head_into(&mut out, tree.title(), &css, scripts, live.is_some());
    let _ = write!(out, "<body data-session=\"{}\"", tree.session);
    if let Some(position) = live {
        let _ = write!(out, " data-position=\"{position}\"");
    }
    out.push_str(">\n<div id=\"content\">\n");
    content_into(&mut out, tree, live.is_some(), exports);
    out.push_str("</div>\n");
    tail_into(&mut out, scripts);
    out
}

/// What the page shows (header, controls, picture, thoughts, with what the families of
/// `exports` add): the part the `ui` replaces when the ledger changes. `linked`: a link
/// back to the `ui`'s session list.
pub(crate) fn content_into(out: &mut String, tree: &ThoughtTree, linked: bool, exports: &Exports) {
    let first = u64::from(tree.at_seq > 0);
    out.push_str("<header>\n");
    if linked {
        out.push_str("<div class=\"meta\"><a href=\"/\">← all sessions</a></div>\n");
    }
    out.push_str("<h1>");
    escape_xml_into(out, tree.title());
    out.push_str("</h1>\n<div class=\"meta\">");
    let summary = tree.summary.as_ref();
    let picture = Picture::of(tree, exports.pictures());
    let _ = write!(
        out,
        "{} · {} · session {}",
        tree.kind().map_or("unknown", |kind| kind.as_str()),
        summary.map_or("unknown", |s| s.status()),
        tree.session,
    );
    // What the session has: thoughts, and the families' nodes (a plan has no thoughts).
    // The script counts them again as the slider moves ([`SCRIPT`]'s `counts`): which
    // parts there are, and each branch's first event, are in the span's attributes.
    let with_thoughts = !tree.order.is_empty() || picture.nodes.is_empty();
    out.push_str(" · <span id=\"counts\"");
    if with_thoughts {
        out.push_str(" data-branch-seqs=\"");
        for (index, branch) in tree.branches.iter().enumerate() {
            let _ = write!(
                out,
                "{}{}",
                if index > 0 { " " } else { "" },
                branch.first_seq
            );
        }
        out.push('"');
    }
    if !picture.nodes.is_empty() {
        out.push_str(" data-nodes=\"1\"");
    }
    out.push('>');
    if with_thoughts {
        let _ = write!(
            out,
            "{} · {} · ",
            counted(tree.order.len(), "thought", "thoughts"),
            counted(tree.branches.len(), "branch", "branches"),
        );
    }
    if !picture.nodes.is_empty() {
        let _ = write!(out, "{} · ", counted(picture.nodes.len(), "node", "nodes"));
    }
    let _ = write!(
        out,
        "{}</span>",
        counted(tree.at_seq as usize, "event", "events")
    );
    if let Some(summary) = summary {
        let _ = write!(
            out,
            " · created {} · updated {}",
            format_time(summary.created_at),
            format_time(summary.updated_at)
        );
    }
    if !tree.anomalies.is_empty() {
        let _ = write!(
            out,
            " · {}: ",
            counted(tree.anomalies.len(), "anomaly", "anomalies")
        );
        for (index, anomaly) in tree.anomalies.iter().enumerate() {
            if index > 0 {
                out.push_str("; ");
            }
            out.push_str(&anomaly_text(anomaly));
        }
    }
    out.push_str("</div>\n");
    for render in exports.renders() {
        for note in render.header_notes(tree) {
            out.push_str("<div class=\"meta\">");
            escape_xml_into(out, &note);
            out.push_str("</div>\n");
        }
    }
    let _ = write!(
        out,
        "<div class=\"controls\">\
         <label>Replay <input id=\"replay\" type=\"range\" min=\"{first}\" max=\"{last}\" \
         value=\"{last}\" step=\"1\"></label> <output id=\"replay-at\">event {last} of {last}</output> \
         <label>Filter <input id=\"filter\" type=\"search\" placeholder=\"text in thoughts\" \
         autocomplete=\"off\"></label> <output id=\"filter-count\"></output></div>\n</header>\n\
         <main>\n<section id=\"picture-pane\">\n",
        last = tree.at_seq
    );
    svg::render_into(
        out,
        tree,
        &picture,
        svg::Options { embedded: true },
        exports,
    );
    out.push_str("</section>\n<section id=\"thoughts-pane\">\n<ol id=\"thoughts\">\n");
    // Thoughts and the families' listed nodes, merged in event order.
    let mut entries: Vec<(usize, &Node, &Entry)> = picture
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(index, node)| Some((index, node, node.entry.as_ref()?)))
        .collect();
    entries.sort_by_key(|(_, node, _)| node.seq);
    let mut entries = entries.into_iter().peekable();
    let mut marks: Vec<&Mark> = picture.marks.iter().collect();
    marks.sort_by_key(|mark| mark.seq);
    let mut marks = marks.into_iter().peekable();
    for node in tree.thoughts() {
        while let Some((index, extra, entry)) = entries.next_if(|(_, n, _)| n.seq < node.seq) {
            write_entry(out, index, extra, entry, tree.actor_at(extra.seq));
        }
        let mut mine = Vec::new();
        while let Some(mark) = marks.next_if(|mark| mark.seq <= node.seq) {
            if mark.seq == node.seq {
                mine.push(mark);
            }
        }
        write_thought(out, node, &mine);
    }
    for (index, extra, entry) in entries {
        write_entry(out, index, extra, entry, tree.actor_at(extra.seq));
    }
    out.push_str("</ol>\n</section>\n</main>\n");
}

/// Generated text only (seqs and numbers).
fn anomaly_text(anomaly: &Anomaly) -> String {
    match anomaly {
        Anomaly::DanglingRevision {
            seq,
            revises_thought,
        } => format!("#{seq} revises thought {revises_thought}, which does not exist"),
        Anomaly::DanglingBranchPoint {
            seq,
            branch_from_thought,
        } => format!("#{seq} branches from thought {branch_from_thought}, which does not exist"),
        Anomaly::SelfReference {
            seq,
            thought_number,
        } => format!("#{seq} refers to itself (thought {thought_number})"),
        Anomaly::Cycle => "the graph has a cycle".to_string(),
    }
}

/// A family node's item: its number linked to the node, its kind, meta, text, details.
fn write_entry(out: &mut String, index: usize, node: &Node, entry: &Entry, actor: Option<&str>) {
    let seq = node.seq;
    let _ = write!(
        out,
        "<li id=\"thought-{seq}\" class=\"k-{} event\" data-seq=\"{seq}\"",
        node.kind.name
    );
    push_actor(out, actor);
    let _ = write!(
        out,
        "<div class=\"meta\"><a href=\"#p{index}\">#{seq}</a> · {} {}",
        node.kind.marker, node.kind.name
    );
    if !entry.meta.is_empty() {
        out.push_str(" · ");
        escape_xml_into(out, &entry.meta);
    }
    push_by(out, actor);
    out.push_str("</div>");
    if !entry.text.is_empty() {
        out.push_str("<pre class=\"text\">");
        escape_xml_into(out, &entry.text);
        out.push_str("</pre>");
    }
    write_details(out, &entry.details);
    out.push_str("</li>\n");
}

/// ` · by NAME` in an item's meta line, when its event names who wrote it.
fn push_by(out: &mut String, actor: Option<&str>) {
    if let Some(actor) = actor {
        out.push_str(" · by ");
        escape_xml_into(out, actor);
    }
}

/// Labelled details, one line each (label constant, value escaped).
fn write_details(out: &mut String, details: &[(&'static str, String)]) {
    for (label, value) in details {
        out.push_str("<div class=\"meta\">");
        escape_xml_into(out, label);
        out.push_str(": ");
        escape_xml_into(out, value);
        out.push_str("</div>");
    }
}

fn write_thought(out: &mut String, node: &ThoughtNode, marks: &[&Mark]) {
    let kind = marks
        .iter()
        .rev()
        .find_map(|mark| mark.kind)
        .unwrap_or_else(|| node_kind(node));
    let seq = node.seq;
    let _ = write!(
        out,
        "<li id=\"thought-{seq}\" class=\"k-{}\" data-seq=\"{seq}\"",
        kind.name
    );
    push_actor(out, node.actor.as_deref());
    let _ = write!(
        out,
        "<div class=\"meta\"><a href=\"#n{seq}\">#{seq}</a> · {} {} {}",
        kind.marker, kind.name, node.thought_number
    );
    if let Some(total) = node.total_thoughts {
        let _ = write!(out, "/{total}");
    }
    out.push_str(" · ");
    out.push_str(&format_time(node.at));
    out.push_str(" · ");
    escape_xml_into(out, &node.tool);
    push_by(out, node.actor.as_deref());
    if let Some(branch) = &node.branch_id {
        out.push_str(" · branch ");
        escape_xml_into(out, branch);
        if let Some(from) = node.branch_from_thought {
            let _ = write!(out, " from {from}");
        }
    }
    if let Some(target) = node.revises_thought {
        let _ = write!(out, " · revises {target}");
    }
    if node.next_thought_needed == Some(false) {
        out.push_str(" · last");
    }
    if node.needs_more_thoughts == Some(true) {
        out.push_str(" · needs more thoughts");
    }
    out.push_str("</div><pre class=\"text\">");
    escape_xml_into(out, &node.thought);
    out.push_str("</pre>");
    if let Some(purpose) = &node.thread_purpose {
        out.push_str("<div class=\"meta\">thread: ");
        escape_xml_into(out, purpose);
        out.push_str("</div>");
    }
    if let Some(tool) = &node.tool_recommendation {
        out.push_str("<div class=\"meta\">recommended tool: ");
        escape_xml_into(out, tool);
        out.push_str("</div>");
    }
    if !node.open_items.is_empty() {
        out.push_str("<ul class=\"meta\">");
        for item in &node.open_items {
            out.push_str("<li>");
            escape_xml_into(out, item);
            out.push_str("</li>");
        }
        out.push_str("</ul>");
    }
    for mark in marks {
        write_details(out, &mark.details);
    }
    out.push_str("</li>\n");
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::{Payload, SessionKind};
    use crate::export::mermaid::tests::{HOSTILE, cargo_target_dir, hostile_tree, think_tree};
    use crate::projection::fixtures::{recorded, seq_thought, tree_with_aliases};
    use crate::tools::thinking::SequentialThought;

    #[test]
    fn base64_examples() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    /// Text from the ledger never opens a tag, a comment, CDATA or an entity other than
    /// the escaper's, never closes the page's elements, and never carries a raw control
    /// or bidi character.
    #[test]
    fn a_hostile_actor_stays_text_in_every_export() {
        use crate::export::svg::tests as pictures;
        for text in HOSTILE.iter().chain(CANARIES) {
            let sessions = vec![
                pictures::events_of(
                    SessionKind::THINKING,
                    vec![recorded(seq_thought("a thought", 1, 1))],
                ),
                pictures::plan_events("plan"),
                pictures::qa_events("qa"),
                pictures::agent_events("agent"),
                pictures::booster_events("booster"),
            ];
            for (session, mut events) in sessions {
                for event in &mut events {
                    event.actor = Some(text.to_string());
                }
                let tree = ThoughtTree::build(session, events, &crate::tools::folds());
                let page = render(&tree, &crate::tools::exports());
                let svg = svg::render(&tree, &crate::tools::exports());
                let markdown = crate::export::markdown::render(&tree, &crate::tools::exports());
                roxmltree::Document::parse(&svg).expect("the SVG stays XML");
                for raw in [
                    "<script>alert",
                    "<img",
                    "\u{202E}",
                    "\u{0}",
                    "\u{1b}",
                    "<!--",
                ] {
                    assert!(!page.contains(raw), "{raw:?} reached the page");
                    assert!(!svg.contains(raw), "{raw:?} reached the SVG");
                }
                assert_eq!(page.matches("<script>").count(), 1);
                assert!(page.contains("data-actor=\""), "{page}");
                assert!(svg.contains("data-actor=\""));
                assert!(markdown.lines().all(|line| !line.starts_with("<")));
            }
        }
    }

    #[test]
    fn hostile_text_stays_text() {
        let all: String = HOSTILE.concat();
        let canaries = CANARIES.concat();
        let texts = HOSTILE.iter().chain(CANARIES).copied();
        for text in texts.chain([all.as_str(), canaries.as_str()]) {
            let mut trees = vec![hostile_tree(text), think_tree(text)];
            trees.extend(crate::export::svg::tests::family_trees(text));
            for tree in trees {
                let page = render(&tree, &crate::tools::exports());
                for raw in [
                    "<script>alert",
                    "<img",
                    "\u{202E}",
                    "\u{0}",
                    "\u{1b}",
                    "<!--",
                ] {
                    assert!(!page.contains(raw), "{raw:?} reached the page");
                }
                assert_eq!(page.matches("<script>").count(), 1);
                assert_eq!(page.matches("<style>").count(), 1);
                assert!(!page.contains(" style=\""));
                // Only the page's own tags: every `<` before the script is one of ours.
                let markup = &page[..page.find("<script>").unwrap()];
                for (index, _) in markup.match_indices('<') {
                    let tag: String = markup[index + 1..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '/' || *c == '!')
                        .collect();
                    assert!(
                        [
                            "!DOCTYPE", "html", "/html", "head", "/head", "meta", "title",
                            "/title", "style", "/style", "body", "/body", "header", "/header",
                            "h1", "/h1", "div", "/div", "span", "/span", "label", "/label",
                            "input", "output", "/output", "main", "/main", "section", "/section",
                            "svg", "/svg", "defs", "/defs", "marker", "/marker", "path", "text",
                            "/text", "tspan", "/tspan", "g", "/g", "a", "/a", "rect", "ol", "/ol",
                            "li", "/li", "pre", "/pre", "ul", "/ul", "script", "/script"
                        ]
                        .contains(&tag.as_str()),
                        "unexpected tag {tag:?}"
                    );
                }
            }
        }
    }

    /// The header counts anomalies in words: "1 anomaly", never "1 anomalies".
    #[test]
    fn the_header_counts_one_anomaly_in_the_singular() {
        use crate::projection::fixtures::{recorded, seq_thought, tree_with_aliases};
        let tree = tree_with_aliases(
            "one anomaly",
            crate::event::SessionKind::THINKING,
            Vec::new(),
            vec![
                recorded(seq_thought("first", 1, 2)),
                recorded(crate::tools::thinking::SequentialThought {
                    revises_thought: Some(42),
                    ..seq_thought("revises a thought that is not there", 2, 2)
                }),
            ],
        );
        assert_eq!(tree.anomalies.len(), 1);
        let page = render(&tree, &crate::tools::exports());
        assert!(page.contains(" · 1 anomaly: "), "{page}");
        assert!(!page.contains("1 anomalies"));
    }

    #[test]
    fn the_policy_allows_exactly_the_page_script_and_stylesheet() {
        let page = render(&hostile_tree("x"), &crate::tools::exports());
        let css = page_stylesheet(&crate::tools::exports());
        let policy = content_security_policy(&css, &[SCRIPT], false);
        assert!(page.contains(&format!("content=\"{policy}\"")));
        assert!(page.contains(&format!("<style>{css}</style>")));
        assert!(page.contains(&format!("<script>{SCRIPT}</script>")));
        assert!(policy.starts_with("default-src 'none'"));
    }

    /// A session of `thoughts` thoughts: a main line with a revision every 10th thought and
    /// a branch every 50th (each branch two thoughts long).
    pub(crate) fn big_tree(thoughts: u64) -> ThoughtTree {
        let mut payloads: Vec<Payload> = Vec::new();
        let mut number = 0;
        let mut branches = 0;
        while (payloads.len() as u64) < thoughts {
            number += 1;
            let index = payloads.len() as u64;
            if index % 50 == 49 {
                branches += 1;
                for step in 0..2 {
                    payloads.push(recorded(SequentialThought {
                        branch_from_thought: Some(number - 1),
                        branch_id: Some(format!("branch-{branches}")),
                        ..seq_thought(
                            &format!("branch {branches} step {step}"),
                            number + step,
                            thoughts,
                        )
                    }));
                }
            } else if index % 10 == 9 {
                payloads.push(recorded(SequentialThought {
                    is_revision: Some(true),
                    revises_thought: Some(number - 3),
                    ..seq_thought(&format!("revising {}", number - 3), number, thoughts)
                }));
            } else {
                payloads.push(recorded(seq_thought(
                    &format!("thought {number}: weighing the options one by one"),
                    number,
                    thoughts,
                )));
            }
        }
        payloads.truncate(thoughts as usize);
        tree_with_aliases(
            "a long session",
            SessionKind::THINKING,
            Vec::new(),
            payloads,
        )
    }

    /// Texts that would run, load or break something if they reached the page as markup;
    /// the browser check fails if `window.__pwned` is ever set, the title changes, a
    /// request leaves the page, or the policy is violated.
    const CANARIES: &[&str] = &[
        "<img src=x onerror=\"window.__pwned=1;document.title='PWNED'\">",
        "<script>window.__pwned=2</script>",
        "<a href=\"javascript:window.__pwned=3\">click</a>",
        "</svg><svg onload=\"window.__pwned=4\"></svg>",
        "</pre></li></ol></main><script>window.__pwned=5</script>",
        "</title></style></script><script>window.__pwned=6</script>",
        "<iframe src=\"http://127.0.0.1:9/frame\"></iframe>",
        "<link rel=stylesheet href=\"http://127.0.0.1:9/x.css\">",
        "<style>@import url(http://127.0.0.1:9/y.css)</style>",
        "]]><!-- comment --><![CDATA[ x ]]>&amp;&#x3C;script&#x3E;",
        "\" onmouseover=\"window.__pwned=7\" x=\"",
        "' onfocus='window.__pwned=8' autofocus '",
    ];

    /// Writes pages for the browser check (`.ci/browser-check`, `tools/browser-check/`)
    /// to `browser-fixtures/` in cargo's target directory, each with `NAME.expect.json`
    /// beside it: the picture's nodes (seq, kind) and edges as the projection and the
    /// families draw them, the thought seqs, the listed events, and for the ks the check
    /// moves the slider to, the nodes (seq, kind, label text) of the picture of the tree
    /// folded to event k and the events listed by k.
    #[test]
    fn write_pages_for_the_browser_check() {
        use crate::export::svg::tests::{
            evaluated_branch_events, expected, plan_events, qa_events, shown_nodes,
        };
        let dir = cargo_target_dir().join("browser-fixtures");
        std::fs::create_dir_all(&dir).unwrap();
        let all: String = HOSTILE.concat();
        let canaries = CANARIES.concat();
        let built = |(session, events): (crate::event::SessionId, Vec<crate::event::Event>)| {
            (
                ThoughtTree::build(session, events.clone(), &crate::tools::folds()),
                Some((session, events)),
            )
        };
        let mut pages = vec![
            ("canary".to_string(), (hostile_tree(&canaries), None)),
            ("hostile-all".to_string(), (hostile_tree(&all), None)),
            ("think-all".to_string(), (think_tree(&all), None)),
            ("big-1000".to_string(), (big_tree(1000), None)),
            ("big-100".to_string(), (big_tree(100), None)),
            ("small-5".to_string(), (big_tree(5), None)),
            ("plan-canary".to_string(), built(plan_events(&canaries))),
            ("plan-hostile".to_string(), built(plan_events(&all))),
            ("plan-short".to_string(), built(plan_events("p"))),
            (
                "branch-events-canary".to_string(),
                built(evaluated_branch_events(&canaries)),
            ),
            ("qa-canary".to_string(), built(qa_events(&canaries))),
            ("qa-hostile".to_string(), built(qa_events(&all))),
        ];
        for (i, text) in HOSTILE.iter().enumerate().step_by(3) {
            pages.push((format!("hostile-{i:02}"), (hostile_tree(text), None)));
        }
        for (name, (tree, events)) in pages {
            let ks: Vec<u64> = if tree.at_seq <= 20 {
                (1..=tree.at_seq).collect()
            } else {
                let mut ks = vec![1, 2, 3, 10, 57, 100, 333, 500, 999, tree.at_seq];
                ks.retain(|&k| k <= tree.at_seq);
                ks.dedup();
                ks
            };
            let (nodes, edges) = expected(&tree);
            let picture = Picture::of(&tree, crate::tools::exports().pictures());
            let mut items: Vec<u64> = tree
                .thoughts()
                .map(|node| node.seq)
                .chain(
                    picture
                        .nodes
                        .iter()
                        .filter(|n| n.entry.is_some())
                        .map(|n| n.seq),
                )
                .collect();
            items.sort_unstable();
            let at: serde_json::Map<String, serde_json::Value> = ks
                .iter()
                .map(|&k| {
                    // The picture of the first k events, folded afresh (or, for a tree
                    // built by hand, whose events are not kept, its thoughts by k).
                    let shown = match &events {
                        Some((session, events)) => shown_nodes(
                            &svg::render(
                                &ThoughtTree::build(
                                    *session,
                                    events[..k as usize].to_vec(),
                                    &crate::tools::folds(),
                                ),
                                &crate::tools::exports(),
                            ),
                            None,
                        ),
                        None => shown_nodes(&svg::render(&tree, &crate::tools::exports()), None)
                            .into_iter()
                            .filter(|(seq, _, _)| *seq <= k)
                            .collect(),
                    };
                    let listed: Vec<u64> = items.iter().copied().filter(|&s| s <= k).collect();
                    (
                        k.to_string(),
                        serde_json::json!({"nodes": shown, "items": listed}),
                    )
                })
                .collect();
            let mut expect = serde_json::json!({
                "nodes": nodes,
                "thoughts": tree.thoughts().map(|n| n.seq).collect::<Vec<_>>(),
                "items": items,
                "edges": edges.iter().map(|(from, to, kind)| serde_json::json!({
                    "from": from, "to": to, "kind": kind,
                })).collect::<Vec<_>>(),
                "lastSeq": tree.at_seq,
                "at": at,
            });
            if name == "big-1000" {
                // Only revisions' text holds "revising" (the metadata never does).
                let seqs: Vec<u64> = tree
                    .thoughts()
                    .filter(|node| node.thought.contains("revising"))
                    .map(|node| node.seq)
                    .collect();
                let dimmed = tree.order.len() - seqs.len();
                expect["filter"] =
                    serde_json::json!({"query": "Revising", "seqs": seqs, "dimmed": dimmed});
            }
            if name == "plan-short" {
                // The query is in the evaluations' details only: their items stay, and
                // every other node is dimmed.
                let seqs: Vec<u64> = crate::tools::planning::state::Planning::of(&tree)
                    .evaluations
                    .iter()
                    .map(|e| e.seq)
                    .collect();
                let dimmed = nodes.len() - seqs.len();
                expect["filter"] =
                    serde_json::json!({"query": "×0.3", "seqs": seqs, "dimmed": dimmed});
            }
            std::fs::write(
                dir.join(format!("{name}.html")),
                render(&tree, &crate::tools::exports()),
            )
            .unwrap();
            std::fs::write(
                dir.join(format!("{name}.expect.json")),
                serde_json::to_string(&expect).unwrap(),
            )
            .unwrap();
        }
    }
}
