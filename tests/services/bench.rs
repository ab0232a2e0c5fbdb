//! The benchmark harness, `reasoning-ledger-bench`: it runs end to end with tiny counts
//! (not a timing test), measures the `reasoning-ledger` binary built beside it, and
//! fails loudly, naming the command to run, when that binary is missing. Its
//! side-by-side run of two builds (`--baseline`) runs end to end too, this build standing
//! in for both, and reports every figure.

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
        "--filled-thoughts",
        "40",
        "--rebuild-events",
        "50",
        "--mermaid-thoughts",
        "20",
        "--open-events",
        "60",
        "--durability",
        "--durability-events",
        "30",
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
    // One append made durable each way, redb alone beside our store.
    let durability = &report["durability"];
    assert_eq!(durability["filled_events"], 30, "{durability}");
    for way in [
        "floor_p50_us",
        "redb_exclusive_p50_us",
        "redb_multi_writer_p50_us",
        "store_p50_us",
        "store_redb_alone_p50_us",
    ] {
        assert!(
            durability[way].as_f64().is_some_and(|v| v > 0.0),
            "{way} in {durability}"
        );
    }
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
    // The start on a filled ledger, the 64-in-flight run with its CPU per call, and
    // private memory are in the report beside the reference too.
    assert_eq!(report["servers"]["settings"]["filled_thoughts"], 40);
    for figure in [
        &ours["filled_spawn_to_initialize"]["median_us"],
        &ours["wide_in_flight"]["calls_per_sec"],
        &ours["cpu_per_call_us"],
        &ours["rss_anon_idle_kib"],
        &ours["rss_kib"][0]["anon_kib"],
    ] {
        assert!(
            figure.as_f64().is_some_and(|v| v > 0.0),
            "{figure} in {ours}"
        );
    }
}

#[test]
fn the_side_by_side_run_of_two_builds_reports_every_figure() {
    // This build stands in for the baseline too: not a timing test, only that both are
    // measured in every round and every figure is reported, in JSON and as a table.
    let scratch = data_dir();
    let server = bin();
    let args = [
        "--baseline",
        server.to_str().unwrap(),
        "--scratch",
        scratch.path().to_str().unwrap(),
        "--rounds",
        "2",
        "--calls",
        "12",
        "--spawn-runs",
        "2",
        "--rss-at",
        "20",
        "--filled-thoughts",
        "30",
    ];
    let json = bench(&[&args[..], &["--json"]].concat());
    assert!(json.status.success(), "{}", stderr(&json));
    let report: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("JSON report");
    let side_by_side = &report["side_by_side"];
    let figures = side_by_side["figures"].as_array().expect("figures");
    let keys: Vec<&str> = figures.iter().filter_map(|f| f["key"].as_str()).collect();
    assert_eq!(
        keys,
        [
            "start_empty_us",
            "start_filled_us",
            "one_caller_p50_us",
            "in_flight_calls_per_sec",
            "wide_in_flight_calls_per_sec",
            "cpu_per_call_us",
            "vm_rss_kib_after_20",
            "rss_anon_kib_after_20",
        ],
        "{side_by_side}"
    );
    for figure in figures {
        for side in ["baseline", "this", "ratio"] {
            assert!(
                figure[side].as_f64().is_some_and(|v| v > 0.0),
                "{side} of {figure}"
            );
        }
        for rounds in ["baseline_rounds", "this_rounds"] {
            assert_eq!(figure[rounds].as_array().map(Vec::len), Some(2), "{figure}");
        }
    }
    for side in ["baseline", "this"] {
        let build = &side_by_side[side];
        assert_eq!(build["command"][0], server.to_str().unwrap(), "{build}");
        assert_eq!(build["rounds"].as_array().map(Vec::len), Some(2), "{build}");
    }
    assert_eq!(side_by_side["settings"]["filled_thoughts"], 30);
    assert_eq!(
        side_by_side["settings"]["order"],
        serde_json::json!(["baseline", "this"])
    );
    // Every session's directory and every copy of the filled ledger is gone again.
    assert!(!scratch.path().join("servers").exists());

    let table = bench(&args);
    assert!(table.status.success(), "{}", stderr(&table));
    let text = stdout(&table);
    assert!(
        text.contains("| figure | baseline | this | ratio |"),
        "{text}"
    );
    for row in [
        "| spawn → initialize answered, empty ledger, median of 2 |",
        "| spawn → initialize answered, a ledger of 30 thoughts (",
        "| one caller, p50 of 12 calls |",
        "| 8 in flight on one connection |",
        "| 64 in flight on one connection |",
        "| server CPU per durable call, 64 in flight (user + system) |",
        "| VmRSS after 20 thoughts |",
        "| private memory (RssAnon) after 20 thoughts |",
    ] {
        assert!(text.contains(row), "{row} missing from {text}");
    }
    assert!(!text.contains("failed"), "{text}");

    // A baseline that is not there fails before anything is measured.
    let missing = bench(&["--baseline", "/nonexistent/reasoning-ledger"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("--baseline /nonexistent/reasoning-ledger: no such file"),
        "{}",
        stderr(&missing)
    );
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
