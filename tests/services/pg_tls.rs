//! TLS to PostgreSQL (issue 22): a real PostgreSQL with `ssl=on` on a loopback TCP port the
//! OS picked, a CA and a server certificate (localhost, 127.0.0.1) made by the test
//! (`tools/pg certs`, the openssl CLI), TCP open only over TLS and only for the ledger's
//! user (`tools/pg start-tls`: `hostssl` with a password, `hostnossl … reject`). Each
//! `sslmode` as libpq means it: `require` encrypts (the server's `pg_stat_ssl` says so), so
//! does the default `prefer` (doctor says so),
//! `verify-full` with the right CA writes and reads a thought through the binary,
//! `verify-ca` takes any host name, and what must be refused is, at start, with an error
//! naming the cause: a foreign CA, a host name the certificate does not name, the system's
//! roots for a private CA, and `sslmode=disable` (the server's own refusal).

use crate::common::{self, call, data_dir, stderr, structured, thought};
use crate::pg;
use postgres::{Client, NoTls};
use std::path::{Path, PathBuf};
use std::process::Output;

/// Tries at a port: the OS's free port can be taken between our asking and the server's
/// binding it.
const PORT_TRIES: usize = 3;

/// A TLS PostgreSQL of this test's own, stopped and removed when dropped.
struct TlsCluster {
    dir: PathBuf,
    /// The ledger user's URL (TCP, password, no sslmode).
    url: String,
    /// The superuser's URL (the cluster's Unix socket).
    admin: String,
    /// The CA that signed the server's certificate.
    ca: PathBuf,
    /// A CA of another test run: signed nothing of this server.
    foreign_ca: PathBuf,
    _certs: tempfile::TempDir,
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().unwrap().port()
}

fn tools_pg(args: &[&str]) -> Output {
    std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tools/pg"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run tools/pg: {e}"))
}

impl TlsCluster {
    fn start() -> TlsCluster {
        let certs = tempfile::tempdir().unwrap();
        let (ours, foreign) = (certs.path().join("ours"), certs.path().join("foreign"));
        for dir in [&ours, &foreign] {
            let made = tools_pg(&["certs", dir.to_str().unwrap()]);
            assert!(made.status.success(), "tools/pg certs: {}", stderr(&made));
        }
        let mut failures = Vec::new();
        for _ in 0..PORT_TRIES {
            let dir = tempfile::Builder::new()
                .prefix("reasoning-ledger-pg-tls.")
                .tempdir_in("/tmp")
                .unwrap()
                .keep();
            let port = free_port().to_string();
            let started = tools_pg(&[
                "start-tls",
                dir.to_str().unwrap(),
                ours.to_str().unwrap(),
                &port,
            ]);
            if started.status.success() {
                let url = String::from_utf8(started.stdout)
                    .unwrap()
                    .trim()
                    .to_string();
                let admin = tools_pg(&["url", dir.to_str().unwrap()]);
                return TlsCluster {
                    dir,
                    url,
                    admin: String::from_utf8(admin.stdout).unwrap().trim().to_string(),
                    ca: ours.join("ca.crt"),
                    foreign_ca: foreign.join("ca.crt"),
                    _certs: certs,
                };
            }
            failures.push(stderr(&started));
            tools_pg(&["stop", dir.to_str().unwrap()]);
        }
        panic!("tools/pg start-tls failed {PORT_TRIES} times: {failures:#?}");
    }

    /// The ledger user's URL with `query` added.
    fn url(&self, query: &str) -> String {
        format!("{}?{query}", self.url)
    }

    /// The same URL to another host name, still reaching 127.0.0.1 (libpq's `hostaddr`).
    fn url_as_host(&self, host: &str, query: &str) -> String {
        format!(
            "{}?hostaddr=127.0.0.1&{query}",
            self.url.replace("@localhost:", &format!("@{host}:"))
        )
    }

    fn password(&self) -> &str {
        let userinfo = self.url.split_once("://").unwrap().1;
        userinfo
            .split_once('@')
            .unwrap()
            .0
            .split_once(':')
            .unwrap()
            .1
    }

    /// `(ssl, count)` of the ledger user's connections, as the server sees them.
    fn ledger_connections(&self) -> Vec<(bool, String, i64)> {
        let admin = self.admin.clone();
        std::thread::spawn(move || {
            let mut client = Client::connect(&admin, NoTls).expect("the admin socket");
            client
                .query(
                    "SELECT s.ssl, coalesce(s.version, ''), count(*) FROM pg_stat_ssl s \
                     JOIN pg_stat_activity a USING (pid) \
                     WHERE a.usename = 'ledger' AND a.application_name = 'reasoning-ledger' \
                     GROUP BY 1, 2",
                    &[],
                )
                .expect("pg_stat_ssl")
                .iter()
                .map(|row| (row.get(0), row.get(1), row.get(2)))
                .collect()
        })
        .join()
        .unwrap()
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        tools_pg(&["stop", self.dir.to_str().unwrap()]);
    }
}

/// Runs `serve` on `url` with no client: it fails at start, or reads EOF and exits 0.
fn serve_refused(url: &str, dir: &Path, cluster: &TlsCluster, what: &str) -> String {
    let output = pg::cli(url, dir, &["serve"]);
    let message = stderr(&output);
    assert!(!output.status.success(), "{what}: serve started");
    assert!(
        !message.contains(cluster.password()),
        "{what}: the password is printed: {message}"
    );
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls_each_sslmode_as_libpq_means_it() {
    let cluster = TlsCluster::start();
    let dir = data_dir();
    let ca = cluster.ca.display().to_string();

    // require: encrypted, and the server sees it on every connection of the server.
    let require = cluster.url("sslmode=require");
    let server = common::spawn_with(dir.path(), &["--store", &require], &[]).await;
    structured(
        &call(
            &server,
            "sequentialthinking",
            thought(1, 1, false, "over TLS"),
        )
        .await,
    );
    let seen = cluster.ledger_connections();
    assert!(
        !seen.is_empty()
            && seen
                .iter()
                .all(|(ssl, version, _)| *ssl && version.starts_with("TLS")),
        "the server sees the ledger's connections encrypted: {seen:?}"
    );
    server.cancel().await.unwrap();

    // prefer (libpq's default, no sslmode): TLS when the server offers it, not checked.
    let prefer = common::stdout(&pg::cli(&cluster.url, dir.path(), &["doctor"]));
    assert!(
        prefer.contains("ok    store TLS       TLS")
            && prefer.contains("not verified (sslmode=prefer"),
        "{prefer}"
    );

    // verify-full with the right CA: a thought written and read back through the binary.
    let full = cluster.url(&format!("sslmode=verify-full&sslrootcert={ca}"));
    let server = common::spawn_with(dir.path(), &["--store", &full], &[]).await;
    let answer = structured(
        &call(
            &server,
            "sequentialthinking",
            thought(1, 1, false, "verified both ways"),
        )
        .await,
    );
    server.cancel().await.unwrap();
    let session = answer["sessionId"].as_str().unwrap();
    let exported = pg::cli(&full, dir.path(), &["export", session, "-f", "jsonl"]);
    assert!(exported.status.success(), "export: {}", stderr(&exported));
    assert!(
        common::stdout(&exported).contains("verified both ways"),
        "{}",
        common::stdout(&exported)
    );
    let doctor = common::stdout(&pg::cli(&full, dir.path(), &["doctor"]));
    assert!(
        doctor.contains("ok    store TLS       TLS") && doctor.contains("chain and host name"),
        "{doctor}"
    );

    // verify-ca checks the chain only: another host name still connects.
    let chain_only = cluster.url_as_host(
        "not-in-the-certificate.test",
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    );
    let verified = pg::cli(&chain_only, dir.path(), &["verify"]);
    assert!(
        verified.status.success(),
        "verify-ca: {}",
        stderr(&verified)
    );

    // verify-full with a CA that did not sign the server's certificate.
    let foreign = format!(
        "sslmode=verify-full&sslrootcert={}",
        cluster.foreign_ca.display()
    );
    let message = serve_refused(&cluster.url(&foreign), dir.path(), &cluster, "foreign CA");
    assert!(
        message.contains("the server's certificate is not signed by a CA of sslrootcert=")
            && message.contains(&cluster.foreign_ca.display().to_string())
            && message.contains("unknown issuer"),
        "{message}"
    );

    // The system's roots do not hold the test's private CA.
    let message = serve_refused(
        &cluster.url("sslrootcert=system"),
        dir.path(),
        &cluster,
        "system roots",
    );
    assert!(
        message.contains("not signed by a CA of the system's root certificates"),
        "{message}"
    );

    // verify-full to a host name the certificate does not name.
    let wrong_host = cluster.url_as_host(
        "not-in-the-certificate.test",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let message = serve_refused(&wrong_host, dir.path(), &cluster, "wrong host name");
    assert!(
        message.contains(
            "the server's certificate is not valid for the host name \"not-in-the-certificate.test\""
        ) && message.contains("it names localhost, 127.0.0.1"),
        "{message}"
    );

    // sslmode=disable: the server accepts this user only over TLS (hostnossl … reject).
    let message = serve_refused(
        &cluster.url("sslmode=disable"),
        dir.path(),
        &cluster,
        "sslmode=disable",
    );
    assert!(
        message.contains("refused the connection")
            && message.contains("no encryption")
            && message.contains("sslmode=disable asked for no TLS"),
        "{message}"
    );

    // prefer whose TLS fails (a foreign CA) tries plain next, as libpq: refused here,
    // the TLS failure logged.
    let prefer_foreign = format!(
        "sslmode=prefer&sslrootcert={}",
        cluster.foreign_ca.display()
    );
    let message = serve_refused(
        &cluster.url(&prefer_foreign),
        dir.path(),
        &cluster,
        "prefer, foreign CA",
    );
    assert!(
        message.contains("connecting without TLS")
            && message.contains("unknown issuer")
            && message.contains("no encryption"),
        "{message}"
    );

    // An sslmode libpq does not know.
    let message = serve_refused(
        &cluster.url("sslmode=verify_full"),
        dir.path(),
        &cluster,
        "unknown sslmode",
    );
    assert!(
        message.contains("unknown sslmode=\"verify_full\""),
        "{message}"
    );
}
