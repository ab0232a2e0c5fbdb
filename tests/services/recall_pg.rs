//! Recall (issue 20) on PostgreSQL: the relevance set of `tests/it/recall_set.rs`, run on
//! a redb ledger copied to PostgreSQL (its own full-text search, schema version 2).

use crate::common::{cli, data_dir, spawn_with, stderr};
use crate::pg::{self, Schema};
use crate::recall_set::{TOOLSETS, cli_json, relevance_fixture, relevance_set};

#[tokio::test]
async fn the_relevance_set_passes_on_postgres_as_on_redb() {
    let dir = data_dir();
    let client = spawn_with(dir.path(), &["--toolsets", TOOLSETS], &[]).await;
    let fixture = relevance_fixture(&client).await;
    client.cancel().await.unwrap();
    let redb = |args: &[&str]| {
        let mut full = vec!["search"];
        full.extend_from_slice(args);
        full.push("--json");
        cli_json(cli(dir.path(), &full), &format!("redb search {args:?}"))
    };
    relevance_set(&redb, &fixture, true, true);

    // The same ledger copied to PostgreSQL answers the same set.
    let schema = Schema::new();
    let copied = cli(dir.path(), &["copy", "--to", &schema.url]);
    assert!(copied.status.success(), "{}", stderr(&copied));
    let scratch = data_dir();
    let postgres = |args: &[&str]| {
        let mut full = vec!["search"];
        full.extend_from_slice(args);
        full.push("--json");
        cli_json(
            pg::cli(&schema.url, scratch.path(), &full),
            &format!("pg search {args:?}"),
        )
    };
    relevance_set(&postgres, &fixture, false, false);
}
