//! Pure readings of a model's answer and of a branch request: the gatekeeper, the
//! conclusion, the confidence and the suggestions (specs/agent.md).
//!
//! Owns: [`gatekeeper`], [`conclusion`], [`confidence`], [`suggestions_in`], the prompts'
//! fixed texts and the strategies by call type. Must not: do I/O.

use crate::tools::agent::node::CallType;

/// Fewest characters of a branch's `input_text`.
pub(crate) const MIN_BRANCH_INPUT_CHARS: usize = 30;

/// Nodes one session may hold (the original's quota).
pub(crate) const DEFAULT_NODE_QUOTA: u64 = 16;

/// Below this confidence a verify branch is suggested.
pub(crate) const LOW_CONFIDENCE: f64 = 0.7;

/// Phrases that hand a sub-model the whole task (the original's Chinese ones and ours in
/// English), matched case-insensitively.
pub(crate) const WHOLE_TASK_PHRASES: [&str; 16] = [
    "完成整个任务",
    "完成全部任务",
    "输出最终答案",
    "给出最终答案",
    "从头到尾设计",
    "从头到尾地设计",
    "complete the whole task",
    "complete the entire task",
    "do the whole task",
    "solve the whole task",
    "solve the entire task",
    "output the final answer",
    "give the final answer",
    "provide the final answer",
    "design it from start to finish",
    "design from start to finish",
];

/// The system prompt of every branch: fixed, first, byte-stable (provider caches).
pub(crate) const BRANCH_SYSTEM_PROMPT: &str = "You answer one self-contained sub-question of a larger analysis. Write a line \"[Analysis]\" followed by your reasoning, then a line \"[Final Conclusion]\" followed by the conclusion in a few sentences. End with a line \"Confidence: 0.xx\": how sure you are of the conclusion, from 0 to 1.";

/// The instruction in front of a branch's input, by call type.
pub(crate) fn branch_instruction(call_type: CallType) -> &'static str {
    match call_type {
        CallType::DrillDown => "Task (drill down): go deep into this specific point.",
        CallType::Verify => {
            "Task (verify): check this claim critically and say whether it holds and why."
        }
        CallType::Explore => {
            "Task (explore): look at this from different angles and name the alternatives."
        }
        CallType::Stash => "Task (stash): note this side thought briefly for later.",
    }
}

/// (temperature, top_p, max_tokens) by call type.
pub(crate) fn strategy(call_type: CallType) -> (f64, f64, u64) {
    match call_type {
        CallType::DrillDown => (0.2, 0.2, 2048),
        CallType::Verify => (0.0, 0.1, 2048),
        CallType::Explore => (1.0, 0.9, 2048),
        CallType::Stash => (0.6, 0.6, 2048),
    }
}

/// Why a branch request is refused, in the gatekeeper's order (short input, whole task,
/// quota), or `None`.
pub(crate) fn gatekeeper(
    input_text: &str,
    nodes: u64,
    quota: u64,
) -> Option<(&'static str, String)> {
    let chars = input_text.trim().chars().count();
    if chars < MIN_BRANCH_INPUT_CHARS {
        return Some((
            "input_text",
            format!(
                "too short ({chars} characters, at least {MIN_BRANCH_INPUT_CHARS}): describe a complete, self-contained sub-question with its context"
            ),
        ));
    }
    let lower = input_text.to_lowercase();
    if let Some(phrase) = WHOLE_TASK_PHRASES.iter().find(|p| lower.contains(*p)) {
        return Some((
            "input_text",
            format!(
                "hands over the whole task ({phrase:?}): a branch takes one sub-question; keep the overall task and the final answer to yourself"
            ),
        ));
    }
    if nodes >= quota {
        return Some((
            "session_id",
            format!(
                "the session has used its quota of {quota} branch nodes: integrate the existing conclusions (get_branch_details) instead of branching further"
            ),
        ));
    }
    None
}

/// Markers the conclusion follows (first found wins, in text order).
const CONCLUSION_MARKERS: [&str; 4] = [
    "[最终结论]",
    "【最终结论】",
    "[final conclusion]",
    "final conclusion:",
];

/// The conclusion of a model's answer: the text after the first marker, trimmed; else
/// the last paragraph when there are several; else the whole text. A trailing
/// `Confidence:` line is not part of it.
pub(crate) fn conclusion(text: &str) -> String {
    let lower = text.to_lowercase();
    // Byte offsets of `lower` match `text` only when lowercasing kept lengths; find the
    // marker in `text` by char-insensitive search instead.
    let found = CONCLUSION_MARKERS
        .iter()
        .filter_map(|marker| find_ignore_case(text, &lower, marker).map(|at| (at, marker)))
        .min_by_key(|(at, _)| *at);
    let body = match found {
        Some((at, marker)) => text[at..].get(marker_len(text, at, marker)..).unwrap_or(""),
        None => {
            let paragraphs: Vec<&str> = text
                .split("\n\n")
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect();
            let paragraphs: Vec<&str> = paragraphs
                .into_iter()
                .filter(|p| !is_confidence_line(p))
                .collect();
            match paragraphs.as_slice() {
                [.., last] if paragraphs.len() > 1 => last,
                _ => text,
            }
        }
    };
    let kept: Vec<&str> = body
        .trim()
        .lines()
        .filter(|line| !is_confidence_line(line))
        .collect();
    kept.join("\n").trim().to_string()
}

/// Where `marker` (lowercase) starts in `text`, comparing case-insensitively.
fn find_ignore_case(text: &str, lower: &str, marker: &str) -> Option<usize> {
    if lower.len() == text.len() {
        return lower.find(marker);
    }
    // Lowercasing changed lengths somewhere: scan char boundaries.
    text.char_indices()
        .map(|(at, _)| at)
        .find(|&at| text[at..].to_lowercase().starts_with(marker))
}

/// Bytes of `text` from `at` that the marker covers.
fn marker_len(text: &str, at: usize, marker: &str) -> usize {
    let wanted = marker.chars().count();
    text[at..]
        .char_indices()
        .nth(wanted)
        .map_or(text.len() - at, |(len, _)| len)
}

fn is_confidence_line(line: &str) -> bool {
    confidence_of_line(line).is_some()
}

/// The value of a `Confidence: 0.85` / `Confidence: 85%` / `置信度：0.85` line.
fn confidence_of_line(line: &str) -> Option<f64> {
    let line = line.trim().trim_start_matches(['*', '#', '-', ' ']).trim();
    let lower = line.to_lowercase();
    let rest = ["confidence", "置信度"]
        .iter()
        .find_map(|label| lower.strip_prefix(label))?;
    let rest = rest.trim_start_matches(['*', ' ', '(', ')']);
    let rest = rest
        .strip_prefix(':')
        .or_else(|| rest.strip_prefix('：'))
        .or_else(|| rest.strip_prefix('='))?;
    let rest = rest.trim().trim_start_matches(['*', ' ']);
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let value: f64 = number.parse().ok()?;
    let percent = rest[number.len()..].trim_start().starts_with('%');
    let value = if percent || value > 1.0 {
        value / 100.0
    } else {
        value
    };
    (value.is_finite() && (0.0..=1.0).contains(&value)).then_some(value)
}

/// The confidence the model stated (the last `Confidence:` line), 0–1; `None` when it
/// gave none.
pub(crate) fn confidence(text: &str) -> Option<f64> {
    text.lines().rev().find_map(confidence_of_line)
}

/// The language of the suggestions: English, or the original's Chinese texts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Language {
    English,
    Chinese,
}

/// The suggestions of a `create_branch` answer, in the spec's order, in `language`.
pub(crate) fn suggestions_in(
    language: Language,
    call_type: CallType,
    confidence: Option<f64>,
    remaining: u64,
) -> Vec<String> {
    let zh = language == Language::Chinese;
    let mut out = Vec::new();
    if let Some(c) = confidence.filter(|c| *c < LOW_CONFIDENCE) {
        out.push(if zh {
            format!("置信度较低（{c:.2}），建议创建 verify 分支验证该结论")
        } else {
            format!(
                "Confidence is {c:.2}: create a verify branch (call_type \"verify\") to check this conclusion."
            )
        });
    }
    let by_type = match (call_type, zh) {
        (CallType::Explore, false) => Some(
            "Exploration done: drill down (call_type \"drill_down\") into the valuable directions.",
        ),
        (CallType::Explore, true) => Some("发散探索完成，可对有价值的方向用 drill_down 深入"),
        (CallType::DrillDown, false) => Some(
            "Verify the key premises (call_type \"verify\") or explore alternatives (call_type \"explore\").",
        ),
        (CallType::DrillDown, true) => Some("可用 verify 验证关键前提，或用 explore 探索其他方向"),
        (CallType::Verify, false) => {
            Some("Verify the other assumptions, or synthesise the verified conclusions.")
        }
        (CallType::Verify, true) => Some("可继续验证其他假设，或综合已验证的结论"),
        (CallType::Stash, _) => None,
    };
    out.extend(by_type.map(str::to_string));
    if remaining > 3 {
        out.push(if zh {
            format!("还可创建 {remaining} 个分支，建议继续多角度探索")
        } else {
            format!("{remaining} more branches available: keep exploring from several angles.")
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conclusion_follows_the_first_marker_in_either_language() {
        let text = "[Analysis]\nstep\n\n[Final Conclusion]\nIt holds.\nConfidence: 0.85";
        assert_eq!(conclusion(text), "It holds.");
        assert_eq!(confidence(text), Some(0.85));
        assert_eq!(conclusion("分析……\n【最终结论】 成立。"), "成立。");
        assert_eq!(
            conclusion("x [最终结论]甲 [Final Conclusion] 乙"),
            "甲 [Final Conclusion] 乙"
        );
        assert_eq!(conclusion("FINAL CONCLUSION: yes"), "yes");
        assert_eq!(conclusion("İstanbul ß final conclusion: ok"), "ok");
    }

    #[test]
    fn without_a_marker_the_last_paragraph_or_the_whole_text() {
        assert_eq!(conclusion("one\n\ntwo\n\nthree"), "three");
        assert_eq!(conclusion("one\n\nthree\n\nConfidence: 80%"), "three");
        assert_eq!(conclusion("just this"), "just this");
        assert_eq!(conclusion(""), "");
    }

    #[test]
    fn confidence_reads_fractions_and_percentages_and_nothing_else() {
        assert_eq!(confidence("Confidence: 85%"), Some(0.85));
        assert_eq!(confidence("**Confidence:** 0.4"), Some(0.4));
        assert_eq!(confidence("置信度：0.9"), Some(0.9));
        assert_eq!(confidence("Confidence: 70"), Some(0.7));
        assert_eq!(confidence("Confidence: high"), None);
        assert_eq!(confidence("Confidence: 150%"), None);
        assert_eq!(confidence("no line"), None);
    }

    #[test]
    fn the_gatekeeper_checks_length_then_whole_task_then_quota() {
        assert_eq!(gatekeeper("short", 99, 16).unwrap().0, "input_text");
        let long = "Please complete the whole task and answer everything about it.";
        assert!(gatekeeper(long, 99, 16).unwrap().1.contains("whole task"));
        let zh = "请你完成整个任务，并且把所有细节都考虑清楚，谢谢你的帮助与支持。";
        assert!(zh.chars().count() >= 30);
        assert!(gatekeeper(zh, 0, 16).unwrap().1.contains("whole task"));
        let fine = "Check whether the cache invalidation covers the delete path.";
        assert_eq!(gatekeeper(fine, 16, 16).unwrap().0, "session_id");
        assert!(gatekeeper(fine, 15, 16).is_none());
    }

    #[test]
    fn suggestions_follow_the_spec_order() {
        let s = suggestions_in(Language::English, CallType::Explore, Some(0.5), 10);
        assert_eq!(s.len(), 3);
        assert!(s[0].contains("verify") && s[1].contains("drill") && s[2].starts_with("10 more"));
        assert!(suggestions_in(Language::English, CallType::Stash, None, 3).is_empty());
        let zh = suggestions_in(Language::Chinese, CallType::Explore, None, 12);
        assert_eq!(
            zh,
            [
                "发散探索完成，可对有价值的方向用 drill_down 深入",
                "还可创建 12 个分支，建议继续多角度探索"
            ]
        );
    }
}
