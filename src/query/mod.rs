//! The read side every front end uses: sessions, trees, history, search, replay and the
//! export of a session, read from a [`crate::store::Ledger`].
//!
//! Owns: the questions asked of stored sessions and the shapes of their answers that more
//! than one front end shares ([`sessions`]: the newest-first list and its rows;
//! [`session`]: a session's tree as of any event and its rendering in an export format;
//! [`history`]: a session's events, filtered and paged; [`search`]: ranked matches
//! over every event's text behind one seam, [`search::search`], over [`crate::recall`]). Callers: the `ledger` tool
//! family ([`crate::tools::ledger`], argument parsing and answers only), the other
//! families (a session's tree), [`crate::server`] (resources), [`crate::ui`], the
//! [`crate::cli`] and the benchmark harness.
//!
//! Arrows: `query` reads through [`crate::store::Ledger`], folds through [`crate::projection`] and
//! renders through [`crate::export`]; it never names a tool or a front end. Must not:
//! write to the ledger, parse a tool's arguments, or decide how a front end presents an
//! error (functions return [`crate::store::StoreError`], search
//! [`crate::recall::RecallError`]; the caller words it).

pub(crate) mod history;
pub(crate) mod search;
pub(crate) mod session;
pub(crate) mod sessions;

pub(crate) use history::{HistoryFilter, branches_without, event_row, event_type_names, history};
pub(crate) use search::{RecallError, SearchRequest, search};
#[cfg(test)]
pub(crate) use session::load_for_export;
pub(crate) use session::load_tree;
pub(crate) use session::{
    UpToDamage, export_session, export_session_up_to_damage, find_session,
    load_for_export_up_to_damage, load_tree_up_to_damage,
};
pub(crate) use sessions::{
    all_sessions, list_sessions, parse_cursor, session_list_answer, sessions_answer,
};
