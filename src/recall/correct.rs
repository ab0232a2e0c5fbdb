//! The typo retry of a lexical search: when a query finds nothing, each word of
//! five characters or more that the index does not hold is replaced
//! by the word one edit away that it holds in most documents, the search is run again,
//! and the answer says so in its note ("no match for postgress; showing postgres").
//!
//! Owns: when to retry and the note. Must not: retry a page after the first (its cursor
//! belongs to the query it was given for), or answer with a correction that finds nothing
//! either (the first, empty answer stands then, without a note).

use super::query::{ParsedQuery, Unit};
use super::{Recall, RecallError, SearchAnswer, SearchRequest, TextSearch};
use crate::store::Ledger;

impl Recall {
    /// [`Recall::lexical`], retried with corrected words when it finds nothing; the note
    /// says what was corrected.
    pub(super) fn lexical_corrected(
        &self,
        ledger: &Ledger,
        request: &SearchRequest,
        parsed: &ParsedQuery,
    ) -> Result<(SearchAnswer, Option<String>), RecallError> {
        let answer = self.lexical(ledger, request, parsed)?;
        // A later page belongs to the query it was given for (a first page may carry a
        // cursor too: a grouped search reads its ranking deep from offset 0).
        if !answer.matches.is_empty() || request.cursor.is_some_and(|c| c.offset > 0) {
            return Ok((answer, None));
        }
        let mut corrected = parsed.clone();
        let mut typed = Vec::new();
        let mut shown = Vec::new();
        for unit in &mut corrected.wanted {
            let Unit::Word(word) = unit else {
                continue;
            };
            if let Some(better) = self.correction(ledger, word)? {
                typed.push(word.clone());
                shown.push(better.clone());
                *word = better;
            }
        }
        if typed.is_empty() {
            return Ok((answer, None));
        }
        let retried = self.lexical(ledger, request, &corrected)?;
        if retried.matches.is_empty() {
            return Ok((answer, None));
        }
        let note = format!(
            "no match for {}; showing {}",
            typed.join(" "),
            shown.join(" ")
        );
        Ok((retried, Some(note)))
    }

    /// The word one edit away from `word` that the index holds in most documents, if
    /// `word` is long enough and not held itself.
    fn correction(&self, ledger: &Ledger, word: &str) -> Result<Option<String>, RecallError> {
        match (&self.index, super::postgres::text_search(ledger)) {
            (_, Some(backend)) => backend.correction(ledger, word),
            (Some(index), None) => index.correction(ledger, word),
            (None, None) => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::recall::index::one_edit_away;

    #[test]
    fn one_edit_reaches_deletions_swaps_replacements_and_insertions() {
        let near = one_edit_away("postgress");
        for word in ["postgres", "psotgress", "postgrass", "postgresss"] {
            assert!(near.contains(&word.to_string()), "{word}");
        }
        assert!(!near.contains(&"postgress".to_string()));
        assert!(!near.contains(&"postgr".to_string()));
    }
}
