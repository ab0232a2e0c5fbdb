//! MCP Apps as a real host renders them (issue 43): `tools/apps-check/run` builds a host
//! in headless Debian chromium from `@modelcontextprotocol/ext-apps`'s app bridge and the
//! MCP TypeScript SDK client, connects to this build's `serve` over stdio and over HTTP,
//! declares the extension, calls the tools and renders the app in a sandboxed iframe
//! (what it checks: `tools/apps-check/check.mjs`). Needs node and chromium (installed by
//! the script when missing; it fails, never skips, when it cannot). Screenshots at 400
//! and 1,200 px, light and dark: `apps-shots/` in cargo's target directory.

use crate::common::bin;
use std::path::PathBuf;

/// `apps-shots/` in cargo's target directory (beside the binary's `debug/`).
fn shots_dir() -> PathBuf {
    bin()
        .parent()
        .and_then(|debug| debug.parent())
        .expect("the binary is in the target directory")
        .join("apps-shots")
}

#[test]
fn a_host_built_from_the_app_bridge_renders_the_session_live() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tools/apps-check/run");
    let shots = shots_dir();
    let output = std::process::Command::new(&script)
        .arg(bin())
        .arg(&shots)
        .output()
        .expect("run tools/apps-check/run");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "the apps check failed:\n{said}");
    println!("{said}");
    for width in [400, 1200] {
        for theme in ["light", "dark"] {
            let shot = shots.join(format!("app-{width}-{theme}.png"));
            assert!(shot.exists(), "no screenshot {}", shot.display());
        }
    }
}
