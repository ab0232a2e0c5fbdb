//! The parse chain's fields: what both of its halves ([`super::chain`], JSON, and
//! [`super::prose`], text) read a proposal's fields with.
//!
//! Owns: the bounds on what is read ([`MAX_PARSED`], [`MAX_FIELD_CHARS`],
//! [`MAX_OUTCOMES`]), [`cut`] (one field, trimmed and bounded) and [`split_outcomes`]
//! (outcomes written as one string). Must not: know either half's syntax.

/// Most proposals read from one answer.
pub(crate) const MAX_PARSED: usize = 32;
/// Most characters of one field read from a model answer (longer is cut).
pub(crate) const MAX_FIELD_CHARS: usize = 1_000;
/// Most outcomes read for one proposal.
pub(crate) const MAX_OUTCOMES: usize = 6;

/// `text` trimmed and cut to [`MAX_FIELD_CHARS`] characters.
pub(super) fn cut(text: &str) -> String {
    text.trim().chars().take(MAX_FIELD_CHARS).collect()
}

/// Outcomes written as one string (`a; b / c | d, e`), each [`cut`], at most
/// [`MAX_OUTCOMES`].
pub(super) fn split_outcomes(text: &str) -> Vec<String> {
    text.split([';', '/', '|', ','])
        .map(cut)
        .filter(|s| !s.is_empty())
        .take(MAX_OUTCOMES)
        .collect()
}
