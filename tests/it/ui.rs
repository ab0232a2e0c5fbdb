//! `reasoning-ledger ui` over HTTP: the address it prints, the list and session pages,
//! the refusals (another Host, another method, an unknown page), and `/changes` answering
//! when another process appends. (The pages in a real browser: `.ci/browser-check`.)

use crate::common::{self, call, spawn, structured, thought};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `ui` child, killed when dropped.
struct Ui {
    child: Child,
    port: u16,
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
    let re = regex::Regex::new(r"^reasoning-ledger ui: http://127\.0\.0\.1:(\d+)/ ").unwrap();
    let port = re.captures(&line).unwrap_or_else(|| panic!("{line:?}"))[1]
        .parse()
        .unwrap();
    Ui { child, port }
}

/// One request; returns (status line, headers with lowercased names, body).
fn request(port: u16, method: &str, path: &str, host: &str) -> (String, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
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

fn get(port: u16, path: &str) -> (String, String, String) {
    request(port, "GET", path, &format!("127.0.0.1:{port}"))
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
    let ui = start_ui(dir.path());
    let port = ui.port;

    let (status, headers, list) = tokio::task::spawn_blocking(move || get(port, "/"))
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

    let path = format!("/sessions/{session}");
    let (status, _, page) = tokio::task::spawn_blocking(move || get(port, &path))
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
    let (_, _, content) = tokio::task::spawn_blocking(move || get(port, &path))
        .await
        .unwrap();
    assert!(
        content.starts_with("<header>") && !content.contains("<script"),
        "{content}"
    );

    let refused = tokio::task::spawn_blocking(move || {
        [
            request(port, "GET", "/", "evil.example:80").0,
            request(port, "POST", "/", &format!("127.0.0.1:{port}")).0,
            get(port, "/sessions/01ARZ3NDEKTSV4RRFFQ69G5FAV").0,
            get(port, "/etc/passwd").0,
            request(port, "GET", "/", &format!("localhost:{port}")).0,
        ]
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

#[tokio::test]
async fn changes_answers_when_another_process_appends() {
    let dir = common::data_dir();
    let client = spawn(dir.path()).await;
    let first = structured(&call(&client, "sequentialthinking", thought(1, 2, true, "one")).await);
    drop(client);
    let ui = start_ui(dir.path());
    let port = ui.port;
    // The ledger's position now: two events (start and the thought).
    let waiting = std::thread::spawn(move || {
        let started = Instant::now();
        (get(port, "/changes?after=2"), started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Another process appends.
    let other = spawn(dir.path()).await;
    let mut next = thought(2, 2, false, "two");
    next["sessionId"] = first["sessionId"].clone();
    call(&other, "sequentialthinking", next).await;
    let ((status, _, body), waited) = tokio::task::spawn_blocking(move || waiting.join().unwrap())
        .await
        .unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body, "3");
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    drop(other);
}
