//! The filter: which parsed candidates are worth scoring.
//!
//! Owns: [`filter()`] (drops empty steps, steps over [`MAX_STEP_CHARS`], meta openers and
//! near-duplicates, [`NEAR_DUPLICATE_AT`]). Must not: rewrite a step beyond trimming it.

use super::{MAX_STEP_CHARS, NEAR_DUPLICATE_AT};
use crate::tools::booster::state::Proposal;
use crate::tools::booster::verifier::{is_meta, jaccard};

/// Drops empty steps, steps over [`MAX_STEP_CHARS`], meta openers and near-duplicates
/// of a step kept before; trims what it keeps.
pub(crate) fn filter(proposals: Vec<Proposal>) -> Vec<Proposal> {
    let mut kept: Vec<Proposal> = Vec::new();
    for mut proposal in proposals {
        proposal.text = proposal.text.trim().to_string();
        if proposal.text.is_empty()
            || proposal.text.chars().count() > MAX_STEP_CHARS
            || is_meta(&proposal.text)
            || kept
                .iter()
                .any(|k| jaccard(&k.text, &proposal.text) >= NEAR_DUPLICATE_AT)
        {
            continue;
        }
        kept.push(proposal);
    }
    kept
}
