//! `reasoning-ledger ui` over HTTP: the address it prints (with this run's key), the list
//! and session pages, the refusals (another Host, another method, an unknown page, no key
//! or cookie, another site's request), and `/changes` answering when another process
//! appends, and `/search` answering the ranked matches of the CLI's search. (The pages in a
//! real browser: `.ci/browser-check`.)

use crate::common::{self, call, spawn, structured, thought};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `ui` child, killed when dropped.
struct Ui {
    child: Child,
    port: u16,
    /// This run's key, from the printed address.
    key: String,
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_ui(dir: &std::path::Path) -> Ui {
    let mut child = Command::new(common::bin())
        .arg("--data-dir")
        .arg(dir)
        .args(["ui", "--port", "0"])
        .env_remove("REASONING_LEDGER_DIR")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start ui");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let re =
        regex::Regex::new(r"^reasoning-ledger ui: http://127\.0\.0\.1:(\d+)/\?key=([0-9a-f]{64}) ")
            .unwrap();
    let captures = re.captures(&line).unwrap_or_else(|| panic!("{line:?}"));
    let port = captures[1].parse().unwrap();
    let key = captures[2].to_string();
    Ui { child, port, key }
}

/// The cookie header of `ui`'s key.
fn cookie(ui: &Ui) -> String {
    format!("Cookie: reasoning_ledger_ui_{}={}\r\n", ui.port, ui.key)
}

/// One request with the key's cookie; returns (status line, headers with lowercased names,
/// body).
fn request(ui: &Ui, method: &str, path: &str, host: &str) -> (String, String, String) {
    raw(ui.port, method, path, host, &cookie(ui))
}

/// One request with `extra` header lines.
fn raw(port: u16, method: &str, path: &str, host: &str, extra: &str) -> (String, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let (status, headers) = head.split_once("\r\n").unwrap();
    // Header names are case-insensitive: compare them lowercased.
    let headers: Vec<String> = headers
        .split("\r\n")
        .map(|line| match line.split_once(':') {
            Some((name, value)) => format!("{}:{value}", name.to_ascii_lowercase()),
            None => line.to_string(),
        })
        .collect();
    (status.to_string(), headers.join("\r\n"), body.to_string())
}

fn get(ui: &Ui, path: &str) -> (String, String, String) {
    request(ui, "GET", path, &format!("127.0.0.1:{}", ui.port))
}

#[tokio::test]
async fn the_ui_serves_the_list_and_pages_and_refuses_the_rest() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let first = structured(
        &call(
            &client,
            "sequentialthinking",
            thought(1, 2, true, "see <b>me</b> & you"),
        )
        .await,
    );
    let session = first["sessionId"].as_str().unwrap().to_string();
    let ui = std::sync::Arc::new(start_ui(dir.path()));
    let port = ui.port;

    let (status, headers, list) = tokio::task::spawn_blocking({
        let ui = ui.clone();
        move || get(&ui, "/")
    })
    .await
    .unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("content-type: text/html; charset=utf-8"),
        "{headers}"
    );
    assert!(
        list.contains(&format!(
            "<a href=\"/sessions/{session}\">see &lt;b&gt;me&lt;/b&gt; &amp; you</a>"
        )),
        "{list}"
    );
    assert!(list.contains("connect-src 'self'"));
    assert!(list.contains("reasoning-ledger · 1 session</h1>"), "{list}");
    // Counts in words: one thought, no branch ids, two events (start + thought).
    assert!(
        list.contains("· 1 thought · 0 branch ids · 2 events · updated "),
        "{list}"
    );

    let path = format!("/sessions/{session}");
    let (status, _, page) = tokio::task::spawn_blocking({
        let ui = ui.clone();
        move || get(&ui, &path)
    })
    .await
    .unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        page.contains(
            "<g class=\"node k-thought\" id=\"n2\" data-seq=\"2\" data-kind=\"thought\">"
        )
    );
    assert!(page.contains("data-position=\""));
    let path = format!("/sessions/{session}?part=content");
    let (_, _, content) = tokio::task::spawn_blocking({
        let ui = ui.clone();
        move || get(&ui, &path)
    })
    .await
    .unwrap();
    assert!(
        content.starts_with("<header>") && !content.contains("<script"),
        "{content}"
    );

    let refused = tokio::task::spawn_blocking({
        let ui = ui.clone();
        move || {
            [
                request(&ui, "GET", "/", "evil.example:80").0,
                request(&ui, "POST", "/", &format!("127.0.0.1:{port}")).0,
                get(&ui, "/sessions/01ARZ3NDEKTSV4RRFFQ69G5FAV").0,
                get(&ui, "/etc/passwd").0,
                request(&ui, "GET", "/", &format!("localhost:{port}")).0,
            ]
        }
    })
    .await
    .unwrap();
    assert_eq!(
        refused,
        [
            "HTTP/1.1 421 Misdirected Request",
            "HTTP/1.1 405 Method Not Allowed",
            "HTTP/1.1 404 Not Found",
            "HTTP/1.1 404 Not Found",
            "HTTP/1.1 200 OK",
        ]
    );
    drop(client);
}

/// Whether the `ui` on `port` has read everything its connection from `client_port` sent
/// (the server end's receive queue in `/proc/net/tcp` is empty): the request was taken.
fn request_read(port: u16, client_port: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp (Linux)");
    let (local, remote) = (
        format!("0100007F:{port:04X}"),
        format!("0100007F:{client_port:04X}"),
    );
    table.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() > 4
            && fields[1] == local
            && fields[2] == remote
            && fields[4]
                .split_once(':')
                .is_some_and(|(_, rx)| rx == "00000000")
    })
}

#[tokio::test]
async fn changes_answers_when_another_process_appends() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let first = structured(&call(&client, "sequentialthinking", thought(1, 2, true, "one")).await);
    drop(client);
    let ui = start_ui(dir.path());
    let port = ui.port;
    let cookie = cookie(&ui);
    // The ledger's position now: two events (start and the thought). A long poll for what
    // comes after it, sent here and read in the background.
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let client_port = stream.local_addr().unwrap().port();
    write!(
        stream,
        "GET /changes?after=2 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{cookie}Connection: close\r\n\r\n"
    )
    .unwrap();
    let started = Instant::now();
    let waiting = std::thread::spawn(move || {
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        (response, started.elapsed())
    });
    // The fence: the ui has taken the request; and it has not answered, nothing changed.
    let fence = Instant::now();
    while !request_read(port, client_port) {
        assert!(
            fence.elapsed() < Duration::from_secs(60),
            "the ui did not read the request within 60 s"
        );
        // A poll interval (the condition has no notification), not a synchronisation.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        !waiting.is_finished(),
        "/changes answered before any change"
    );
    // Another process appends.
    let other = spawn(dir.path()).await;
    let mut next = thought(2, 2, false, "two");
    next["sessionId"] = first["sessionId"].clone();
    call(&other, "sequentialthinking", next).await;
    let (response, waited) = tokio::task::spawn_blocking(move || waiting.join().unwrap())
        .await
        .unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert_eq!(body, "3");
    // Well before LONG_POLL (25 s), when it would answer anyway.
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    drop(other);
}

#[tokio::test]
async fn the_ui_answers_only_the_holder_of_its_key_or_cookie() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    call(
        &client,
        "sequentialthinking",
        thought(1, 1, false, "a secret title"),
    )
    .await;
    drop(client);
    let ui = start_ui(dir.path());
    let (port, key) = (ui.port, ui.key.clone());
    let host = format!("127.0.0.1:{port}");
    let checks = tokio::task::spawn_blocking(move || {
        let none = |path: &str| raw(port, "GET", path, &host, "");
        let anonymous = [none("/"), none("/changes?after=0"), none("/?key=00")];
        let with_key = raw(port, "GET", &format!("/?key={key}"), &host, "");
        let jar = format!("Cookie: other=1; reasoning_ledger_ui_{port}={key}\r\n");
        let with_cookie = raw(port, "GET", "/", &host, &jar);
        let wrong_cookie = raw(
            port,
            "GET",
            "/",
            &host,
            &format!("Cookie: reasoning_ledger_ui_{port}=00{}\r\n", &key[2..]),
        );
        let cross_site = raw(
            port,
            "GET",
            "/changes?after=0",
            &host,
            &format!("{jar}Sec-Fetch-Site: cross-site\r\n"),
        );
        let same_site = raw(
            port,
            "GET",
            "/changes?after=0",
            &host,
            &format!("{jar}Sec-Fetch-Site: same-site\r\nOrigin: http://127.0.0.1:1\r\n"),
        );
        let other_origin = raw(
            port,
            "GET",
            "/changes?after=0",
            &host,
            &format!("{jar}Origin: https://evil.example\r\n"),
        );
        let own_origin = raw(
            port,
            "GET",
            "/changes?after=0",
            &host,
            &format!("{jar}Sec-Fetch-Site: same-origin\r\nOrigin: http://{host}\r\n"),
        );
        (
            anonymous,
            with_key,
            with_cookie,
            wrong_cookie,
            [cross_site, same_site, other_origin],
            own_origin,
        )
    });
    let (anonymous, with_key, with_cookie, wrong_cookie, cross, own_origin) = checks.await.unwrap();
    for (status, _, body) in anonymous.iter().chain([&wrong_cookie]) {
        assert_eq!(status, "HTTP/1.1 401 Unauthorized");
        assert!(
            !body.contains("secret") && !body.contains("session") && !body.contains("<"),
            "{body}"
        );
    }
    let (status, headers, body) = with_key;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("a secret title"), "{body}");
    assert!(
        headers.contains(&format!(
            "set-cookie: reasoning_ledger_ui_{port}={}; Path=/; HttpOnly; SameSite=Strict",
            ui.key
        )),
        "{headers}"
    );
    let (status, headers, body) = with_cookie;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("a secret title"));
    assert!(!headers.contains("set-cookie"), "{headers}");
    for (status, _, body) in cross {
        assert_eq!(status, "HTTP/1.1 403 Forbidden");
        assert_eq!(body, "403 Forbidden\n");
    }
    // The ledger's position, at once: an event was written before the ui started.
    assert_eq!(own_origin.0, "HTTP/1.1 200 OK");
}

/// Issue 35: `ui --port P` on a port another program holds says which port, and what to do.
#[test]
fn a_taken_port_is_named() {
    let dir = crate::common::data_dir();
    let out = crate::common::cli(
        dir.path(),
        &["import", "tests/fixtures/ledger-v2/ledger.jsonl"],
    );
    assert!(out.status.success(), "{}", crate::common::stderr(&out));
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    let out = crate::common::cli(dir.path(), &["ui", "--port", &port]);
    assert_eq!(out.status.code(), Some(1));
    let said = crate::common::stderr(&out);
    assert!(said.contains(&format!("127.0.0.1:{port}")), "{said}");
    assert!(said.contains("--port"), "{said}");
}

/// Issue 35: the list's search box asks `/search`, which answers the CLI's ranked matches
/// with their snippets (escaped, the matched word marked), each linked to its event; a query
/// the CLI refuses answers 400 with the CLI's message; no cookie, 401.
#[tokio::test]
async fn search_answers_ranked_matches_and_the_clis_errors() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let mut sessions = Vec::new();
    for text in [
        "a <b>long</b> thought that names the quokkasaurus once among many other words",
        "quokkasaurus quokkasaurus quokkasaurus",
        "nothing rare at all",
    ] {
        let answer =
            structured(&call(&client, "sequentialthinking", thought(1, 1, false, text)).await);
        sessions.push(answer["sessionId"].as_str().unwrap().to_string());
    }
    drop(client);
    let ui = start_ui(dir.path());
    let port = ui.port;
    let (found, unclosed, empty, anonymous) = tokio::task::spawn_blocking(move || {
        (
            get(&ui, "/search?q=quokkasaurus"),
            get(&ui, "/search?q=%22unclosed+quote"),
            get(&ui, "/search?q="),
            raw(
                port,
                "GET",
                "/search?q=quokkasaurus",
                &format!("127.0.0.1:{port}"),
                "",
            ),
        )
    })
    .await
    .unwrap();

    let (status, headers, body) = found;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(headers.contains("content-type: text/html"), "{headers}");
    let rows: Vec<&str> = body.lines().collect();
    assert_eq!(rows.len(), 2, "{body}");
    // Ranked: the thought that is all the rare word first; the third session not at all.
    assert!(
        rows[0].starts_with(&format!(
            "<li data-rank=\"1\" data-session=\"{}\" data-seq=\"2\"><a href=\"/sessions/{}#thought-2\">",
            sessions[1], sessions[1]
        )),
        "{body}"
    );
    assert!(
        rows[1].starts_with(&format!(
            "<li data-rank=\"2\" data-session=\"{}\" data-seq=\"2\">",
            sessions[0]
        )),
        "{body}"
    );
    assert!(!body.contains(&sessions[2]), "{body}");
    // The snippet: the word marked, the rest escaped.
    assert!(rows[0].contains("<mark>quokkasaurus</mark>"), "{body}");
    assert!(rows[1].contains("<mark>quokkasaurus</mark>"), "{body}");
    assert!(
        rows[1].contains("a &lt;b&gt;long&lt;/b&gt; thought"),
        "{body}"
    );
    assert!(!body.contains("<b>"), "{body}");

    // Query errors: 400 and what the CLI says (its `error: ` prefix aside).
    for ((status, _, body), query) in [(unclosed, "\"unclosed quote"), (empty, "")] {
        assert_eq!(status, "HTTP/1.1 400 Bad Request", "{body}");
        let out = common::cli(dir.path(), &["search", query]);
        assert!(!out.status.success());
        let said = common::stderr(&out);
        assert_eq!(said.trim(), format!("error: {}", body.trim()), "{body}");
    }

    let (status, _, body) = anonymous;
    assert_eq!(status, "HTTP/1.1 401 Unauthorized");
    assert!(!body.contains("quokkasaurus"), "{body}");
}
