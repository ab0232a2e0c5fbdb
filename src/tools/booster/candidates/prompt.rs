//! The prompt: what a model is asked for when the booster wants candidate steps.
//!
//! Owns: [`prompt()`] and the length a step is asked to keep to ([`ASKED_STEP_CHARS`]).
//! Must not: read an answer (the parse chain does).

/// Longest step a model is asked for, in characters.
pub(crate) const ASKED_STEP_CHARS: usize = 200;

/// The prompt asking a model for `k` next steps.
pub(crate) fn prompt(task: &str, steps: &[&str], hints: &[String], k: u64) -> String {
    let mut out = format!(
        "You are helping solve a task one small, verifiable step at a time.\nTask: {task}\n"
    );
    if steps.is_empty() {
        out.push_str("Steps so far: none.\n");
    } else {
        out.push_str("Steps so far:\n");
        for (i, step) in steps.iter().enumerate() {
            out.push_str(&format!("{}. {step}\n", i + 1));
        }
    }
    if !hints.is_empty() {
        out.push_str("Hints:\n");
        for hint in hints {
            out.push_str(&format!("- {hint}\n"));
        }
    }
    out.push_str(&format!(
        "Propose exactly {k} different next steps. Answer with a JSON array only, no prose: \
         [{{\"text\": \"...\", \"rationale\": \"...\", \"how_to_verify\": \"...\", \
         \"expected_outcomes\": [\"...\", \"...\"]}}]. Each text at most {ASKED_STEP_CHARS} \
         characters, one concrete action that can be checked."
    ));
    out
}
