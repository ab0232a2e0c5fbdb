//! The benchmark harness, `reasoning-ledger-bench`: it runs end to end with tiny counts
//! (not a timing test), measures the `reasoning-ledger` binary built beside it, and
//! fails loudly, naming the command to run, when that binary is missing.

use crate::common::*;

/// The harness binary, built by cargo for this test run beside `reasoning-ledger`.
fn bench_bin() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_reasoning-ledger-bench"))
}

fn bench(args: &[&str]) -> std::process::Output {
    std::process::Command::new(bench_bin())
        .args(args)
        .output()
        .expect("running reasoning-ledger-bench")
}

#[test]
fn bench_measures_the_server_end_to_end_with_tiny_counts() {
    // The harness (its own stdio client, 8 calls in flight, RSS, ledger fixtures) must run
    // and report every figure.
    let scratch = data_dir();
    let scratch_arg = scratch.path().to_str().unwrap();
    let bench = bench(&[
        "--json",
        "--no-reference",
        "--scratch",
        scratch_arg,
        "--calls",
        "20",
        "--spawn-runs",
        "2",
        "--rss-at",
        "30",
        "--rebuild-events",
        "50",
        "--mermaid-thoughts",
        "20",
        "--open-events",
        "60",
        "--postgres",
        crate::pg::server_url(),
    ]);
    assert!(bench.status.success(), "{}", stderr(&bench));
    let report: serde_json::Value = serde_json::from_str(&stdout(&bench)).expect("JSON report");
    let text = report.to_string();
    for figure in [
        "servers",
        "ledger",
        "rebuild_ms",
        "mermaid_ms",
        "open_ms",
        "insert_commit_p50_us",
        "store_append_p50_us",
    ] {
        assert!(text.contains(figure), "{figure} missing from {text}");
    }
    assert_eq!(report["ledger"]["rebuild_events"], 50);
    // redb beside PostgreSQL, both measured.
    for store in ["redb", "postgres"] {
        let figures = &report["stores"][store];
        assert!(
            figures["one_caller_p50_us"].as_f64().unwrap() > 0.0,
            "{figures}"
        );
        assert!(
            figures["in_flight_thoughts_per_s"].as_f64().unwrap() > 0.0,
            "{figures}"
        );
    }
    // What was measured is the server binary of this build, found beside the harness.
    let servers = &report["servers"]["servers"];
    let ours = &servers["ours"];
    assert_eq!(ours["command"][0], bin().to_str().unwrap(), "{ours}");
    assert_eq!(ours["command"][1], "serve", "{ours}");
    assert!(ours.get("error").is_none(), "{ours}");
    assert_eq!(servers["reference"], serde_json::Value::Null, "{servers}");
}

#[test]
fn a_missing_server_binary_is_an_error_naming_the_build_command() {
    // The harness alone in a directory, as if only `--bin reasoning-ledger-bench` was built.
    let alone = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let copy = alone.path().join("reasoning-ledger-bench");
    if std::fs::hard_link(bench_bin(), &copy).is_err() {
        std::fs::copy(bench_bin(), &copy).unwrap();
    }
    let output = std::process::Command::new(&copy)
        .args(["--no-ledger", "--no-reference"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let message = stderr(&output);
    assert!(
        message.contains("server binary to measure is missing")
            && message.contains(&alone.path().display().to_string())
            && message.contains("`cargo build"),
        "{message}"
    );

    let flagged = bench(&["--no-ledger", "--server", "/nonexistent/reasoning-ledger"]);
    assert_eq!(flagged.status.code(), Some(1));
    assert!(
        stderr(&flagged).contains("--server /nonexistent/reasoning-ledger: no such file"),
        "{}",
        stderr(&flagged)
    );
}
