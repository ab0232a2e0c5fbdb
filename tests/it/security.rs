//! Issue 36 (what one token holder or one local account can do), the files and text part:
//! terminal escapes in the CLI's text output, private modes of everything the server
//! writes, token files and tokens `serve --http` refuses, redirects from providers,
//! `outputPath` swapped for a symlink, OAuth subjects that cannot pass for a bearer name.

use crate::common::*;

/// A thought holding what a terminal would act on: colours (CSI), a window title and an
/// OSC 8 link ended by BEL, a C1 CSI (U+009B), DEL and a carriage return.
const HOSTILE: &str = "escape \x1b[31mred\x1b[0m \x1b]0;owned title\x07 \x1b]8;;https://evil.example/\x07click\x1b]8;;\x07 c1\u{9b}31m del\x7f cr\rend";

/// Bytes a terminal could act on: C0 other than newline and tab, DEL, C1 (as UTF-8).
fn terminal_controls(text: &str) -> Vec<char> {
    text.chars()
        .filter(|&c| {
            (c < ' ' && c != '\n' && c != '\t') || c == '\x7f' || ('\u{80}'..='\u{9f}').contains(&c)
        })
        .collect()
}

#[tokio::test]
async fn cli_text_output_carries_no_terminal_controls() {
    let dir = data_dir();
    let client = spawn(dir.path()).await;
    let session = one_thought_session(&client, HOSTILE).await;
    client.cancel().await.unwrap();
    let commands: [&[&str]; 5] = [
        &["sessions"],
        &["search", "escape"],
        &["replay", &session],
        &["show", &session],
        &["replay", &session, "--at", "1"],
    ];
    for args in commands {
        let output = cli(dir.path(), args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let text = stdout(&output);
        // The command printed the thought (it was not left out to pass the test).
        assert!(text.contains("escape"), "{args:?}: {text}");
        assert_eq!(
            terminal_controls(&text),
            Vec::<char>::new(),
            "{args:?}: {text:?}"
        );
    }
    // JSON stays exact: the escapes are there, as JSON escapes.
    let output = cli(dir.path(), &["sessions", "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let title = value["sessions"][0]["title"].as_str().unwrap().to_string();
    assert!(title.contains('\x1b'), "{title:?}");
    let output = cli(dir.path(), &["export", &session, "-f", "jsonl"]);
    assert!(stdout(&output).contains("\\u001b]8;;https://evil.example/\\u0007"));
}
