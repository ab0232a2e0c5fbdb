//! `doctor` against a real PostgreSQL store (issue 24): an empty schema, a ledger the
//! demo wrote (schema version, counts, TLS), and a URL asking for TLS from a server that
//! is not there.

use crate::common::*;
use std::process::Output;

fn ok(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what}: {}\n{}",
        stderr(output),
        stdout(output)
    );
    stdout(output)
}

#[test]
fn doctor_checks_a_postgres_store_its_schema_and_tls() {
    let scratch = data_dir();
    let schema = crate::pg::Schema::new();
    let store = ["--store", schema.url.as_str()];
    let empty = ok(
        &cli(scratch.path(), &[&store[..], &["doctor"]].concat()),
        "doctor on an empty schema",
    );
    assert!(empty.contains("reachable, no ledger"), "{empty}");
    ok(
        &cli(scratch.path(), &[&store[..], &["demo"]].concat()),
        "demo",
    );
    let report = ok(
        &cli(scratch.path(), &[&store[..], &["doctor"]].concat()),
        "doctor",
    );
    assert!(
        report.contains("schema version 5") && report.contains("5 session(s), 31 event(s)"),
        "{report}"
    );
    assert!(report.contains("ok    store TLS"), "{report}");
    // A URL asking for TLS, to a server that is not there.
    let unreachable = "postgres://nobody@127.0.0.1:1/none?sslmode=require&connect_timeout=2";
    let refused = cli(scratch.path(), &["--store", unreachable, "doctor"]);
    let report = stdout(&refused);
    assert_eq!(refused.status.code(), Some(1), "{report}");
    assert!(report.contains("sslmode=require"), "{report}");
    assert!(report.contains("FAIL  store "), "{report}");
}
