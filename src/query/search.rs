//! Search over every session's text: a query, its filters, a limit and a cursor in, one
//! page of ranked matches out.
//!
//! Owns: the seam [`search`] every caller searches through (the `search_history` tool, the
//! `recall` prompt, `search` on the command line). The engine behind it is
//! [`crate::recall`] (issue 20: a Tantivy index beside a redb ledger, PostgreSQL's own
//! full-text search for a team ledger); the request and answer shapes are its
//! ([`SearchRequest`], [`SearchAnswer`] and its one JSON shape, [`SearchAnswer::to_json`]).
//! Must not: parse a tool's arguments or add the provenance note (the tool's answer does).

use crate::store::Ledger;

pub(crate) use crate::recall::{Match, RankedAnswer, RecallError, SearchAnswer, SearchRequest};

/// One page of matches for `request`, best first, as of the ledger's end when called.
pub(crate) fn search(
    ledger: &Ledger,
    request: &SearchRequest,
) -> Result<SearchAnswer, RecallError> {
    crate::recall::Recall::for_ledger(ledger).search(ledger, request)
}

/// [`search`] in the request's mode, with each match's rankers and the note of a
/// semantic search that answered lexically.
pub(crate) fn search_ranked(
    ledger: &Ledger,
    request: &SearchRequest,
) -> Result<RankedAnswer, RecallError> {
    crate::recall::Recall::for_ledger(ledger).search_ranked(ledger, request)
}
