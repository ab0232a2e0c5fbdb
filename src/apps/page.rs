//! The app's document: the `html` export's head (its policy by hash: only this
//! document's stylesheet and scripts run, nothing loads), its stylesheet and replay
//! script ([`crate::export::html::SCRIPT`]) unchanged, an empty `#content` that
//! [`APP_SCRIPT`] fills with what [`super::DRAW_TOOL`] answers (the `ui`'s content of
//! the session, [`crate::export::html::content_into`]), and the few rules a chat column,
//! a wide panel and a dark host need ([`APP_CSS`]).
//!
//! Must not: hold ledger text (the document is constant; content arrives escaped by the
//! export), reference a URL, or write a `style` attribute or an inline handler.

use crate::export::family::Exports;
use crate::export::html;

/// The app's script: the MCP Apps handshake over `postMessage` (JSON-RPC 2.0, no SDK),
/// the host's theme and style variables, the tool's results (each draws its session,
/// through [`super::DRAW_TOOL`] via the host's `tools/call`), the following of the open
/// session (a draw with `afterSeq` again and again), node links handled in place, and its
/// size reported to the host.
pub(crate) const APP_SCRIPT: &str = include_str!("app.js");

/// The app's rules over the page's: host variables with the page's colours as fallbacks,
/// a dark theme, panes sized for an iframe that grows with its content, one column under
/// 720 px.
pub(crate) const APP_CSS: &str = include_str!("app.css");

/// The whole document: constant for a build and the families of `exports` (the page's
/// stylesheet holds their kinds).
pub(crate) fn document(exports: &Exports) -> String {
    let css = format!("{}{}", html::page_stylesheet(exports), APP_CSS.trim());
    let scripts: &[&str] = &[html::SCRIPT, APP_SCRIPT];
    let mut out = String::with_capacity(css.len() + html::SCRIPT.len() + APP_SCRIPT.len() + 2048);
    html::head_into(&mut out, "the session", &css, scripts, false);
    out.push_str(
        "<body class=\"app\">\n<div id=\"content\"><p id=\"status\" class=\"meta\">\
         Waiting for the tool's result…</p></div>\n",
    );
    html::tail_into(&mut out, scripts);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_loads_nothing_and_names_the_draw_tool() {
        let page = document(&crate::tools::exports());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("default-src 'none'"));
        assert!(!page.contains("connect-src"));
        for outside in [
            "http://",
            "https://",
            "src=",
            " style=\"",
            "onclick",
            "onload",
        ] {
            assert!(!page.contains(outside), "{outside} in the app");
        }
        assert!(APP_SCRIPT.contains(&format!("'{}'", super::super::DRAW_TOOL)));
        assert_eq!(page.matches("<script>").count(), 2);
        assert_eq!(page.matches("<style>").count(), 1);
    }
}
