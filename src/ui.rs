//! `reasoning-ledger ui`: a read-only web view of the ledger on 127.0.0.1.
//!
//! Owns: a small HTTP/1.1 server (hyper over a tokio `TcpListener`, GET and HEAD only),
//! the session list page, and the routes:
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

use crate::export::counted;
use crate::export::html;
use crate::export::svg::escape_xml_into;
use crate::query;
use crate::store::{Ledger, SessionHead};
use bytes::Bytes;
use http::{Method, StatusCode, header};
use http_body_util::Full;
use hyper::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Longest a `/changes` request waits for a commit before answering anyway.
pub(crate) const LONG_POLL: Duration = Duration::from_secs(25);

/// Largest request head read (hyper's read buffer); a longer one is answered 431.
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
pub(crate) async fn run(ledger: Ledger, port: u16) -> anyhow::Result<()> {
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
    let hosts: Arc<[String]> = Arc::new([
        format!("127.0.0.1:{}", address.port()),
        format!("localhost:{}", address.port()),
    ]);
    loop {
        let (stream, _) = listener.accept().await?;
        let ledger = ledger.clone();
        let hosts = hosts.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let (ledger, hosts) = (ledger.clone(), hosts.clone());
                async move { Ok::<_, Infallible>(respond(&request, ledger, &hosts).await.into_http()) }
            });
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(error) = served {
                tracing::debug!(%error, "ui connection");
            }
        });
    }
}

/// A response: status, content type, body.
struct Response {
    status: StatusCode,
    content_type: &'static str,
    body: String,
}

impl Response {
    fn ok(content_type: &'static str, body: String) -> Response {
        Response {
            status: StatusCode::OK,
            content_type,
            body,
        }
    }

    fn error(status: StatusCode) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{status}\n"),
        }
    }

    /// The HTTP response with the view's fixed headers (a page carries its own CSP).
    fn into_http(self) -> http::Response<Full<Bytes>> {
        let mut builder = http::Response::builder()
            .status(self.status)
            .header(header::CONTENT_TYPE, self.content_type)
            .header(header::CACHE_CONTROL, "no-store")
            .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
            .header(header::REFERRER_POLICY, "no-referrer")
            .header(header::X_FRAME_OPTIONS, "DENY");
        if !self.content_type.starts_with("text/html") {
            builder = builder.header(header::CONTENT_SECURITY_POLICY, "default-src 'none'");
        }
        builder
            .body(Full::new(Bytes::from(self.body)))
            .expect("constant headers are valid")
    }
}

/// Answers one request (hyper drops the body of a HEAD answer).
async fn respond(request: &Request<Incoming>, ledger: Ledger, hosts: &[String]) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok());
    if !host.is_some_and(|host| hosts.iter().any(|h| h == host)) {
        return Response::error(StatusCode::MISDIRECTED_REQUEST);
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return Response::error(StatusCode::METHOD_NOT_ALLOWED);
    }
    let path = request.uri().path();
    let query = request.uri().query().unwrap_or("");
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
        Ok(Ok(None)) => Response::error(StatusCode::NOT_FOUND),
        Ok(Err(error)) => {
            tracing::warn!(%error, "ui read");
            Response::error(StatusCode::INTERNAL_SERVER_ERROR)
        }
        Err(_) => Response::error(StatusCode::INTERNAL_SERVER_ERROR),
    }
}

/// The ledger's last position once it is above `after` (or after [`LONG_POLL`]).
async fn changes(ledger: Ledger, after: u64) -> Response {
    let mut watch = ledger.watch(after + 1);
    let _ = tokio::time::timeout(LONG_POLL, watch.next()).await;
    let position = tokio::task::spawn_blocking(move || ledger.last_position()).await;
    match position {
        Ok(Ok(position)) => Response::ok("text/plain; charset=utf-8", position.to_string()),
        _ => Response::error(StatusCode::INTERNAL_SERVER_ERROR),
    }
}

/// The list or a session's page (`None`: no such page).
fn page(ledger: &Ledger, path: &str, content_only: bool) -> anyhow::Result<Option<Response>> {
    // Read before the content, so a commit in between is shown by the next update.
    let position = ledger.last_position()?;
    if path == "/" {
        let heads = query::all_sessions(ledger)?;
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
    let Some(head) = query::find_session(ledger, id)? else {
        return Ok(None);
    };
    let tree = query::load_tree(ledger, &head, None)?;
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
        "<header><h1>reasoning-ledger · {}</h1><label>Search <input id=\"search\" \
         type=\"search\" placeholder=\"title, kind, id\" autocomplete=\"off\"></label></header>\n\
         <ul id=\"sessions\">\n",
        counted(heads.len(), "session", "sessions")
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
            "</a><div class=\"meta\">{} · {} · {} · {} · {} · updated {} · {}</div></li>",
            s.kind.as_str(),
            s.status(),
            counted(s.thoughts as usize, "thought", "thoughts"),
            counted(s.branches.len(), "branch id", "branch ids"),
            counted(head.seq as usize, "event", "events"),
            crate::event::format_time(s.updated_at),
            head.session
        );
    }
    out.push_str("</ul>\n");
}
