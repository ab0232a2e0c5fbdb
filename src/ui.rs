//! `reasoning-ledger ui`: a read-only web view of the ledger on 127.0.0.1.
//!
//! Owns: a small HTTP/1.1 server (hyper over a tokio `TcpListener`, GET and HEAD only),
//! the session list page, and the routes:
//!
//! - `/`: the sessions, newest first, with a search box;
//! - `/search?q=QUERY`: the ranked matches of the CLI's `search` and `search_history`
//!   (the same query language), as an HTML fragment of rows, each with its snippet and a
//!   link to the event on its session's page; a query that cannot run answers 400 with the
//!   message the CLI gives;
//! - `/sessions/{id}`: the session's page ([`crate::export::html::page`]);
//! - either with `?part=content`: only what the page shows, for its live update;
//! - `/changes?after=N`: answers the ledger's last position as soon as it is above `N`
//!   (a long poll over [`Ledger::watch`], which notices other processes' commits), or
//!   after [`LONG_POLL`] with the position as it is.
//!
//! Every route answers only its owner: the address printed carries a per-run key
//! ([`KEY_BYTES`] from `getrandom`, compared in constant time); the first request with it
//! gets an HttpOnly, SameSite=Strict cookie (named after the port: cookies ignore ports),
//! and a request with neither gets 401 and a body that says nothing of the ledger. A
//! request another site's page makes (`Sec-Fetch-Site` other than `same-origin`/`none`, or
//! another `Origin`) gets 403, so no page can time `/changes` (issue 36).
//!
//! Must not: write to the ledger, listen on anything but loopback, answer a request
//! whose `Host` is not this server's own address (a page of another site cannot reach it
//! through DNS rebinding), answer anything of the ledger without the key or its cookie
//! (other local users reach 127.0.0.1 too), or put ledger text anywhere but escaped.

use crate::export::counted;
use crate::export::family::Exports;
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

/// Random bytes in the per-run key (hex in the address: twice as many characters).
const KEY_BYTES: usize = 32;

/// The query parameter carrying the key in the printed address.
const KEY_PARAM: &str = "key";

/// The answer to a request without the key or its cookie: nothing of the ledger.
const UNAUTHORIZED_BODY: &str = "401 Unauthorized: open the address `reasoning-ledger ui` \
    printed (it carries this run's key)\n";

/// Who may read: the holder of this run's key (in the address) or of its cookie.
struct Access {
    key: String,
    /// `reasoning_ledger_ui_PORT`.
    cookie_name: String,
    /// `http://127.0.0.1:PORT` and `http://localhost:PORT`.
    origins: [String; 2],
}

/// What [`Access::check`] found.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// The cookie: served.
    Cookie,
    /// The key in the query: served, and the cookie set.
    Key,
    /// Neither: 401.
    Unknown,
    /// A request of another site's page: 403.
    CrossSite,
}

impl Access {
    fn new(port: u16) -> anyhow::Result<Access> {
        let mut bytes = [0u8; KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness for a key: {e}"))?;
        Ok(Access {
            key: bytes.iter().map(|b| format!("{b:02x}")).collect(),
            cookie_name: format!("reasoning_ledger_ui_{port}"),
            origins: [
                format!("http://127.0.0.1:{port}"),
                format!("http://localhost:{port}"),
            ],
        })
    }

    fn matches(&self, given: &str) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(given.as_bytes().ct_eq(self.key.as_bytes()))
    }

    fn check<B>(&self, request: &Request<B>) -> Verdict {
        let headers = request.headers();
        let header = |name| {
            headers
                .get(name)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
        };
        if header("sec-fetch-site").is_some_and(|site| site != "same-origin" && site != "none") {
            return Verdict::CrossSite;
        }
        if header(header::ORIGIN.as_str())
            .is_some_and(|origin| !self.origins.iter().any(|o| o == origin))
        {
            return Verdict::CrossSite;
        }
        let cookie = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| name == self.cookie_name && self.matches(value));
        if cookie {
            return Verdict::Cookie;
        }
        let key = request
            .uri()
            .query()
            .unwrap_or("")
            .split('&')
            .filter_map(|pair| pair.strip_prefix(KEY_PARAM)?.strip_prefix('='))
            .any(|given| self.matches(given));
        if key { Verdict::Key } else { Verdict::Unknown }
    }

    /// The cookie the key's first request sets.
    fn set_cookie(&self) -> String {
        format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            self.cookie_name, self.key
        )
    }
}

/// Matches `/search` answers (the first page of the ranked search).
const SEARCH_LIMIT: usize = 20;

/// How long the search box waits after a keystroke before asking `/search`, in ms.
const SEARCH_DEBOUNCE_MS: u32 = 200;

/// The list page's script: a query in the search box is sent to `/search` (after
/// [`SEARCH_DEBOUNCE_MS`], the latest answer wins) and its ranked matches (or the query's
/// error) replace the session list until the box is empty again; asked again when the live
/// update replaces the list.
fn list_script() -> String {
    r#"
(function () {
  'use strict';
  var asked = 0, timer = null;
  function show(query) {
    var results = document.getElementById('results');
    var rows = document.querySelectorAll('#sessions > li');
    for (var i = 0; i < rows.length; i++) { rows[i].classList.toggle('filtered', query !== ''); }
    if (!results) { return; }
    if (query === '') { results.hidden = true; results.textContent = ''; return; }
    var mine = ++asked;
    fetch('/search?q=' + encodeURIComponent(query), { cache: 'no-store' })
      .then(function (response) {
        return response.text().then(function (text) { return [response.status, text]; });
      })
      .then(function (answer) {
        if (mine !== asked) { return; }
        results.hidden = false;
        if (answer[0] === 200) {
          results.innerHTML = answer[1];
        } else {
          results.innerHTML = '<li class="error"></li>';
          results.firstChild.textContent = answer[1];
        }
      });
  }
  function search() {
    var box = document.getElementById('search');
    show(box ? box.value.trim() : '');
  }
  document.addEventListener('input', function (event) {
    if (event.target.id !== 'search') { return; }
    clearTimeout(timer);
    timer = setTimeout(search, DEBOUNCE);
  });
  document.addEventListener('ledger:refreshed', search);
  search();
  document.body.setAttribute('data-ready', '1');
})();
"#
    .replace("DEBOUNCE", &SEARCH_DEBOUNCE_MS.to_string())
}

const LIST_CSS: &str = "\
body{margin:0;font:14px/1.4 system-ui,sans-serif;color:#212529}\
header{background:#f8f9fa;border-bottom:1px solid #dee2e6;padding:8px 16px}\
h1{font-size:18px;margin:0 0 6px}\
#search{width:360px}\
#sessions{list-style:none;margin:0;padding:8px 16px}\
#sessions li{border-bottom:1px solid #f1f3f5;padding:6px 0}\
#sessions li.filtered{display:none}\
#results{list-style:none;margin:0;padding:8px 16px;border-bottom:1px solid #dee2e6}\
#results li{padding:6px 0}#results .error{color:#c92a2a}\
.snippet mark{background:#fff3bf}\
.meta{color:#495057;font-size:12px}\
a{color:#1c7ed6}";

/// Binds 127.0.0.1:`port` (0: a free port), prints the address, and serves until the
/// process is stopped.
pub(crate) async fn run(ledger: Ledger, port: u16) -> anyhow::Result<()> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .map_err(|error| {
            anyhow::Error::new(error).context(match port {
                0 => "cannot listen on 127.0.0.1".to_string(),
                port => format!(
                    "cannot listen on 127.0.0.1:{port} (another program may hold that port: pick \
                 another with --port, or leave it out for a free one)"
                ),
            })
        })?;
    let address = listener.local_addr()?;
    let access = Arc::new(Access::new(address.port())?);
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "reasoning-ledger ui: http://{address}/?{KEY_PARAM}={} (read-only view of {}, \
             for whoever has this address; Ctrl-C stops it)",
            access.key,
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
        let access = access.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let (ledger, hosts, access) = (ledger.clone(), hosts.clone(), access.clone());
                async move {
                    Ok::<_, Infallible>(
                        respond(&request, ledger, &hosts, &access).await.into_http(),
                    )
                }
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
    /// A `Set-Cookie` value.
    cookie: Option<String>,
}

impl Response {
    fn ok(content_type: &'static str, body: String) -> Response {
        Response {
            status: StatusCode::OK,
            content_type,
            body,
            cookie: None,
        }
    }

    fn error(status: StatusCode) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{status}\n"),
            cookie: None,
        }
    }

    fn unauthorized() -> Response {
        Response {
            body: UNAUTHORIZED_BODY.to_string(),
            ..Response::error(StatusCode::UNAUTHORIZED)
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
        if let Some(cookie) = self.cookie {
            builder = builder.header(header::SET_COOKIE, cookie);
        }
        builder
            .body(Full::new(Bytes::from(self.body)))
            .expect("constant headers are valid")
    }
}

/// Answers one request (hyper drops the body of a HEAD answer).
async fn respond(
    request: &Request<Incoming>,
    ledger: Ledger,
    hosts: &[String],
    access: &Access,
) -> Response {
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
    let cookie = match access.check(request) {
        Verdict::Cookie => None,
        Verdict::Key => Some(access.set_cookie()),
        Verdict::Unknown => return Response::unauthorized(),
        Verdict::CrossSite => return Response::error(StatusCode::FORBIDDEN),
    };
    let mut response = answer(request, ledger).await;
    response.cookie = cookie;
    response
}

/// Answers an authorized request.
async fn answer(request: &Request<Incoming>, ledger: Ledger) -> Response {
    let path = request.uri().path();
    let query = request.uri().query().unwrap_or("");
    let content_only = query.split('&').any(|pair| pair == "part=content");
    if path == "/search" {
        let Some(text) = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("q="))
            .map(|value| value.replace('+', " "))
            .and_then(|value| {
                percent_encoding::percent_decode_str(&value)
                    .decode_utf8()
                    .ok()
                    .map(|text| text.into_owned())
            })
        else {
            return Response {
                body: "the query is missing or not UTF-8: ask /search?q=WORDS\n".to_string(),
                ..Response::error(StatusCode::BAD_REQUEST)
            };
        };
        let searched = tokio::task::spawn_blocking(move || search(&ledger, text)).await;
        return searched.unwrap_or_else(|_| Response::error(StatusCode::INTERNAL_SERVER_ERROR));
    }
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

/// `/search`: the first [`SEARCH_LIMIT`] ranked matches of `text` as rows of the list
/// page's `#results`; a query that cannot run: 400 and the CLI's message.
fn search(ledger: &Ledger, text: String) -> Response {
    let request = crate::recall::SearchRequest {
        query: text,
        limit: SEARCH_LIMIT,
        ..Default::default()
    };
    let answer = match query::search::search(ledger, &request) {
        Ok(answer) => answer,
        Err(
            error @ (query::search::RecallError::Query(_) | query::search::RecallError::Cursor(_)),
        ) => {
            return Response {
                body: format!("{error}\n"),
                ..Response::error(StatusCode::BAD_REQUEST)
            };
        }
        Err(error) => {
            tracing::warn!(%error, "ui search");
            return Response::error(StatusCode::INTERNAL_SERVER_ERROR);
        }
    };
    let mut out = String::new();
    for (rank, found) in answer.matches.iter().enumerate() {
        let _ = write!(
            out,
            "<li data-rank=\"{}\" data-session=\"{id}\" data-seq=\"{seq}\">\
             <a href=\"/sessions/{id}#thought-{seq}\">",
            rank + 1,
            id = found.session_id,
            seq = found.seq
        );
        if found.title.trim().is_empty() {
            out.push_str("(untitled)");
        } else {
            escape_xml_into(&mut out, &found.title);
        }
        let _ = write!(
            out,
            " #{}</a> <span class=\"meta\">{} · {} · {:.3}</span><div class=\"snippet\">",
            found.seq, found.kind, found.event_type, found.score
        );
        snippet_into(&mut out, &found.snippet);
        out.push_str("</div></li>\n");
    }
    if answer.matches.is_empty() {
        out.push_str("<li class=\"none\">no matches</li>\n");
    }
    Response::ok("text/html; charset=utf-8", out)
}

/// A match's snippet, escaped, its `**word**` marks as `<mark>`.
fn snippet_into(out: &mut String, snippet: &str) {
    for (part, text) in snippet.split("**").enumerate() {
        let marked = part % 2 == 1;
        if marked {
            out.push_str("<mark>");
        }
        escape_xml_into(out, text);
        if marked {
            out.push_str("</mark>");
        }
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
            let list_script = list_script();
            let scripts = [list_script.as_str(), html::LIVE_SCRIPT];
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
    let exports = Exports::of_families(ledger.families());
    let body = if content_only {
        let mut out = String::new();
        html::content_into(&mut out, &tree, true, &exports);
        out
    } else {
        html::page(&tree, Some(position), &exports)
    };
    Ok(Some(Response::ok("text/html; charset=utf-8", body)))
}

/// The list: one row per session, newest first, linked to its page.
fn list_content_into(out: &mut String, heads: &[SessionHead]) {
    let _ = write!(
        out,
        "<header><h1>reasoning-ledger · {}</h1><label>Search <input id=\"search\" \
         type=\"search\" placeholder=\"words, &quot;a phrase&quot;, -word\" \
         autocomplete=\"off\"></label></header>\n<ol id=\"results\" hidden></ol>\n\
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's URI and headers, and what the view makes of it.
    type Case<'a> = (String, Vec<(&'a str, &'a str)>, Verdict);

    fn request(uri: &str, headers: &[(&str, &str)]) -> Request<()> {
        let mut builder = Request::builder().uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn only_the_key_or_its_cookie_and_never_another_site() {
        let access = Access::new(8000).unwrap();
        assert_eq!(access.key.len(), KEY_BYTES * 2);
        assert_ne!(access.key, Access::new(8000).unwrap().key, "a key per run");
        let key = access.key.clone();
        let cookie = format!("a=b; reasoning_ledger_ui_8000={key}");
        let other_port = format!("reasoning_ledger_ui_8001={key}");
        let cases: [Case; 9] = [
            ("/".into(), vec![], Verdict::Unknown),
            (format!("/?key={key}"), vec![], Verdict::Key),
            (
                format!("/sessions/x?part=content&key={key}"),
                vec![("sec-fetch-site", "none")],
                Verdict::Key,
            ),
            (format!("/?key={}", &key[1..]), vec![], Verdict::Unknown),
            (
                "/changes".into(),
                vec![("cookie", &cookie)],
                Verdict::Cookie,
            ),
            ("/".into(), vec![("cookie", &other_port)], Verdict::Unknown),
            (
                "/changes".into(),
                vec![("cookie", &cookie), ("sec-fetch-site", "same-site")],
                Verdict::CrossSite,
            ),
            (
                "/changes".into(),
                vec![("cookie", &cookie), ("origin", "null")],
                Verdict::CrossSite,
            ),
            (
                "/changes".into(),
                vec![
                    ("cookie", &cookie),
                    ("sec-fetch-site", "same-origin"),
                    ("origin", "http://localhost:8000"),
                ],
                Verdict::Cookie,
            ),
        ];
        for (uri, headers, verdict) in cases {
            assert_eq!(
                access.check(&request(&uri, &headers)),
                verdict,
                "{uri} {headers:?}"
            );
        }
        assert_eq!(
            access.set_cookie(),
            format!("reasoning_ledger_ui_8000={key}; Path=/; HttpOnly; SameSite=Strict")
        );
    }
}
