//! `reasoning-ledger ui`: a read-only web view of the ledger on 127.0.0.1.
//!
//! Owns: a tiny HTTP/1.1 server over a tokio `TcpListener` (GET and HEAD only, one request
//! per connection, `Connection: close`), the session list page, and the routes:
//!
//! - `/`: the sessions, newest first, with a search box;
//! - `/sessions/{id}`: the session's page ([`crate::export::html::page`]);
//! - either with `?part=content`: only what the page shows, for its live update;
//! - `/changes?after=N`: answers the ledger's last position as soon as it is above `N`
//!   (a long poll over [`Ledger::watch`], which notices other processes' commits), or
//!   after [`LONG_POLL`] with the position as it is.
//!
//! Must not: write to the ledger, listen on anything but loopback, answer a request
//! whose `Host` is not this server's own address (a page of another site cannot reach it
//! through DNS rebinding), or put ledger text anywhere but escaped.

use crate::export::html;
use crate::export::svg::escape_xml_into;
use crate::store::{Ledger, SessionHead};
use crate::tools::ledger as ledger_tools;
use std::fmt::Write as _;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Longest a `/changes` request waits for a commit before answering anyway.
pub const LONG_POLL: Duration = Duration::from_secs(25);

/// Largest request head read; a longer one is answered 431.
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// How long a client may take to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// The list page's script: the search box hides the sessions whose row does not hold the
/// text (kept when the live update replaces the list).
const LIST_SCRIPT: &str = r#"
(function () {
  'use strict';
  function search() {
    var box = document.getElementById('search');
    if (!box) { return; }
    var query = box.value.trim().toLowerCase();
    var rows = document.querySelectorAll('#sessions > li');
    for (var i = 0; i < rows.length; i++) {
      var hit = query === '' || rows[i].textContent.toLowerCase().indexOf(query) >= 0;
      rows[i].classList.toggle('filtered', !hit);
    }
  }
  document.addEventListener('input', function (event) {
    if (event.target.id === 'search') { search(); }
  });
  document.addEventListener('ledger:refreshed', search);
  search();
  document.body.setAttribute('data-ready', '1');
})();
"#;

const LIST_CSS: &str = "\
body{margin:0;font:14px/1.4 system-ui,sans-serif;color:#212529}\
header{background:#f8f9fa;border-bottom:1px solid #dee2e6;padding:8px 16px}\
h1{font-size:18px;margin:0 0 6px}\
#search{width:360px}\
#sessions{list-style:none;margin:0;padding:8px 16px}\
#sessions li{border-bottom:1px solid #f1f3f5;padding:6px 0}\
#sessions li.filtered{display:none}\
.meta{color:#495057;font-size:12px}\
a{color:#1c7ed6}";

/// Binds 127.0.0.1:`port` (0: a free port), prints the address, and serves until the
/// process is stopped.
pub async fn run(ledger: Ledger, port: u16) -> anyhow::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let address = listener.local_addr()?;
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "reasoning-ledger ui: http://{address}/ (read-only view of {}; Ctrl-C stops it)",
            ledger.path().display()
        )?;
        out.flush()?;
    }
    let hosts = [
        format!("127.0.0.1:{}", address.port()),
        format!("localhost:{}", address.port()),
    ];
    let hosts: &'static [String] = Box::leak(Box::new(hosts));
    loop {
        let (stream, _) = listener.accept().await?;
        let ledger = ledger.clone();
        tokio::spawn(async move {
            if let Err(error) = serve_connection(stream, ledger, hosts).await {
                tracing::debug!(%error, "ui connection");
            }
        });
    }
}

/// A response: status, content type, body.
struct Response {
    status: &'static str,
    content_type: &'static str,
    body: String,
}

impl Response {
    fn ok(content_type: &'static str, body: String) -> Response {
        Response {
            status: "200 OK",
            content_type,
            body,
        }
    }

    fn error(status: &'static str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{status}\n"),
        }
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    ledger: Ledger,
    hosts: &[String],
) -> anyhow::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let complete = tokio::time::timeout(HEAD_TIMEOUT, async {
        let mut buffer = [0u8; 2048];
        loop {
            let read = stream.read(&mut buffer).await?;
            if read == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            head.extend_from_slice(&buffer[..read]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                return Ok(true);
            }
            if head.len() > MAX_HEAD_BYTES {
                return Ok(false);
            }
        }
    })
    .await;
    let response = match complete {
        Ok(Ok(true)) => respond(&String::from_utf8_lossy(&head), ledger, hosts).await,
        Ok(Ok(false)) if head.len() > MAX_HEAD_BYTES => {
            Response::error("431 Request Header Fields Too Large")
        }
        _ => return Ok(()),
    };
    let is_head = head.starts_with(b"HEAD ");
    let policy = if response.content_type.starts_with("text/html") {
        ""
    } else {
        "Content-Security-Policy: default-src 'none'\r\n"
    };
    let header = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n\
         X-Frame-Options: DENY\r\n{policy}Connection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    stream.write_all(header.as_bytes()).await?;
    if !is_head {
        stream.write_all(response.body.as_bytes()).await?;
    }
    stream.shutdown().await?;
    Ok(())
}

/// Answers one request head.
async fn respond(head: &str, ledger: Ledger, hosts: &[String]) -> Response {
    let mut lines = head.split("\r\n");
    let mut parts = lines.next().unwrap_or("").split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let host = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("host"))
        .map(|(_, value)| value.trim());
    if !host.is_some_and(|host| hosts.iter().any(|h| h == host)) {
        return Response::error("421 Misdirected Request");
    }
    if method != "GET" && method != "HEAD" {
        return Response::error("405 Method Not Allowed");
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let content_only = query.split('&').any(|pair| pair == "part=content");
    if path == "/changes" {
        let after = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("after="))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        return changes(ledger, after).await;
    }
    let path = path.to_string();
    let read = tokio::task::spawn_blocking(move || page(&ledger, &path, content_only)).await;
    match read {
        Ok(Ok(Some(response))) => response,
        Ok(Ok(None)) => Response::error("404 Not Found"),
        Ok(Err(error)) => {
            tracing::warn!(%error, "ui read");
            Response::error("500 Internal Server Error")
        }
        Err(_) => Response::error("500 Internal Server Error"),
    }
}

/// The ledger's last position once it is above `after` (or after [`LONG_POLL`]).
async fn changes(ledger: Ledger, after: u64) -> Response {
    let mut watch = ledger.watch(after + 1);
    let _ = tokio::time::timeout(LONG_POLL, watch.next()).await;
    let position = tokio::task::spawn_blocking(move || ledger.last_position()).await;
    match position {
        Ok(Ok(position)) => Response::ok("text/plain; charset=utf-8", position.to_string()),
        _ => Response::error("500 Internal Server Error"),
    }
}

/// The list or a session's page (`None`: no such page).
fn page(ledger: &Ledger, path: &str, content_only: bool) -> anyhow::Result<Option<Response>> {
    // Read before the content, so a commit in between is shown by the next update.
    let position = ledger.last_position()?;
    if path == "/" {
        let (heads, _) = ledger_tools::list_sessions(ledger, None, None, None, usize::MAX)?;
        let mut out = String::new();
        if content_only {
            list_content_into(&mut out, &heads);
        } else {
            let scripts = [LIST_SCRIPT, html::LIVE_SCRIPT];
            html::head_into(&mut out, "sessions", LIST_CSS, &scripts, true);
            let _ = writeln!(
                out,
                "<body data-position=\"{position}\">\n<div id=\"content\">"
            );
            list_content_into(&mut out, &heads);
            out.push_str("</div>\n");
            html::tail_into(&mut out, &scripts);
        }
        return Ok(Some(Response::ok("text/html; charset=utf-8", out)));
    }
    let Some(id) = path.strip_prefix("/sessions/") else {
        return Ok(None);
    };
    let Some(session) = ledger.resolve(id)? else {
        return Ok(None);
    };
    let Some(head) = ledger.head(session)? else {
        return Ok(None);
    };
    let (tree, _) =
        ledger_tools::load_for_export(ledger, &head, None, crate::export::Format::Html)?;
    let body = if content_only {
        let mut out = String::new();
        html::content_into(&mut out, &tree, true);
        out
    } else {
        html::page(&tree, Some(position))
    };
    Ok(Some(Response::ok("text/html; charset=utf-8", body)))
}

/// The list: one row per session, newest first, linked to its page.
fn list_content_into(out: &mut String, heads: &[SessionHead]) {
    let _ = write!(
        out,
        "<header><h1>reasoning-ledger · {} sessions</h1><label>Search <input id=\"search\" \
         type=\"search\" placeholder=\"title, kind, id\" autocomplete=\"off\"></label></header>\n\
         <ul id=\"sessions\">\n",
        heads.len()
    );
    for head in heads {
        let s = &head.summary;
        let _ = write!(
            out,
            "<li data-session=\"{id}\"><a href=\"/sessions/{id}\">",
            id = head.session
        );
        if s.title.trim().is_empty() {
            out.push_str("(untitled)");
        } else {
            escape_xml_into(out, &s.title);
        }
        let _ = writeln!(
            out,
            "</a><div class=\"meta\">{} · {} · {} thoughts · {} branches · {} events · updated {} \
             · {}</div></li>",
            s.kind.as_str(),
            s.status(),
            s.thoughts,
            s.branches.len(),
            head.seq,
            crate::event::format_time(s.updated_at),
            head.session
        );
    }
    out.push_str("</ul>\n");
}
