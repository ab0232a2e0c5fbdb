//! What a task is about, read from its own words: the heuristic generator's material.
//!
//! Owns: [`task_terms`] and [`TaskTerms`] (keywords: likely nouns first, never a stop
//! word or a task verb; constraints: a parenthesised part or a phrase opened by "using",
//! "with", "at most", …; numbers) and the word lists behind them. Must not: build a
//! step (the heuristic generator does).

use crate::tools::booster::verifier::tokens;

/// Words after which a keyword is likely a noun (what the task is about).
const NOUN_MARKERS: [&str; 16] = [
    "the", "a", "an", "of", "for", "among", "with", "in", "on", "each", "every", "whether", "that",
    "if", "your", "our",
];

/// Verbs of the kind tasks are phrased with: never a keyword.
const VERBS: [&str; 48] = [
    "improve",
    "improves",
    "increase",
    "increases",
    "reduce",
    "reduces",
    "determine",
    "identify",
    "compute",
    "calculate",
    "design",
    "create",
    "build",
    "explain",
    "choose",
    "decide",
    "prove",
    "solve",
    "describe",
    "compare",
    "estimate",
    "evaluate",
    "analyze",
    "analyse",
    "write",
    "makes",
    "affect",
    "affects",
    "causes",
    "depends",
    "minimize",
    "maximize",
    "optimize",
    "ensure",
    "verify",
    "measure",
    "check",
    "tests",
    "finds",
    "using",
    "writes",
    "fails",
    "breaks",
    "returns",
    "crashes",
    "happens",
    "takes",
    "stops",
];

/// Words too common to name what a task is about.
const STOPWORDS: [&str; 52] = [
    "about",
    "above",
    "after",
    "again",
    "against",
    "among",
    "around",
    "because",
    "before",
    "being",
    "below",
    "between",
    "could",
    "doing",
    "during",
    "every",
    "first",
    "given",
    "having",
    "possible",
    "should",
    "their",
    "there",
    "these",
    "thing",
    "things",
    "those",
    "three",
    "through",
    "under",
    "until",
    "using",
    "where",
    "which",
    "while",
    "would",
    "other",
    "still",
    "within",
    "without",
    "write",
    "quickly",
    "least",
    "most",
    "many",
    "something",
    "anything",
    "always",
    "steps",
    "whether",
    "quite",
    "really",
];

/// What the heuristics build from: the task's keywords, constraints and numbers.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TaskTerms {
    pub(crate) keywords: Vec<String>,
    pub(crate) constraints: Vec<String>,
    pub(crate) numbers: Vec<String>,
}

/// Whether `word`, after a likely modifier, is the noun it modifies: a word of three
/// letters or more that is no stop word, task verb, marker or phrase end.
fn is_head_noun(word: &str) -> bool {
    word.chars().count() >= 3
        && word.chars().all(char::is_alphabetic)
        && !STOPWORDS.contains(&word)
        && !VERBS.contains(&word)
        && !NOUN_MARKERS.contains(&word)
        && !PHRASE_ENDS.contains(&word)
        && ![
            "some", "all", "any", "and", "but", "not", "its", "new", "few",
        ]
        .contains(&word)
}

/// Words opening a constraint phrase.
const CONSTRAINT_OPENERS: [&str; 9] = [
    "using",
    "with",
    "without",
    "within",
    "under",
    "only",
    "at most",
    "no more than",
    "before",
];
/// Words that end a constraint phrase (not kept).
const PHRASE_ENDS: [&str; 9] = [
    "in", "as", "to", "and", "so", "that", "then", "while", "for",
];
/// Most words of a constraint phrase.
const CONSTRAINT_WORDS: usize = 6;

/// The task's keywords (≥ 5 letters, not stop words, first-seen order), constraints (a
/// parenthesised part, or a phrase opened by "using", "with", "without", "at most", …)
/// and numbers.
pub(crate) fn task_terms(task: &str) -> TaskTerms {
    // Keywords right after a determiner, a preposition or a number (likely nouns) first,
    // the others after them; each in first-seen order.
    let mut leading: Vec<String> = Vec::new();
    let mut others: Vec<String> = Vec::new();
    // A time of day or a ratio ("06:00", "3:1") is one number, not two: taken whole, and
    // left out of the words (so "the 06:00 deadline" reads "the deadline").
    let mut numbers: Vec<String> = Vec::new();
    let mut words_only = String::with_capacity(task.len());
    for word in task.split_inclusive(char::is_whitespace) {
        let bare = word.trim_matches(|c: char| !c.is_ascii_digit());
        let colon_number = bare.contains(':')
            && bare
                .split(':')
                .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_digit()));
        if colon_number {
            if !numbers.iter().any(|n| n == bare) {
                numbers.push(bare.to_string());
            }
            words_only.push(' ');
        } else {
            words_only.push_str(word);
        }
    }
    let all_tokens = tokens(&words_only);
    let mut previous = String::new();
    let mut skip_next = false;
    for (at, token) in all_tokens.iter().enumerate() {
        if std::mem::take(&mut skip_next) {
            previous = token.clone();
            continue;
        }
        if token.chars().all(|c| c.is_ascii_digit()) {
            if !numbers.contains(token) {
                numbers.push(token.clone());
            }
        } else if token.chars().count() >= 5
            && !STOPWORDS.contains(&token.as_str())
            && !VERBS.contains(&token.as_str())
            && !leading.contains(token)
            && !others.contains(token)
        {
            let after_marker = NOUN_MARKERS.contains(&previous.as_str())
                || previous.chars().all(|c| c.is_ascii_digit()) && !previous.is_empty();
            if after_marker {
                // A modifier and its noun ("an empty file", "the nightly export") are kept
                // together: "the empty" alone reads wrong in a step.
                match all_tokens.get(at + 1).filter(|next| is_head_noun(next)) {
                    Some(next) => {
                        leading.push(format!("{token} {next}"));
                        skip_next = true;
                    }
                    None => leading.push(token.clone()),
                }
            } else {
                others.push(token.clone());
            }
        }
        previous = token.clone();
    }
    let mut keywords = leading;
    keywords.extend(others);
    let mut constraints: Vec<String> = Vec::new();
    let mut rest = task;
    while let Some(open) = rest.find('(') {
        let Some(close) = rest[open..].find(')') else {
            break;
        };
        let inside = rest[open + 1..open + close].trim();
        if !inside.is_empty() && inside.len() <= 80 {
            constraints.push(inside.to_string());
        }
        rest = &rest[open + close + 1..];
    }
    let words: Vec<&str> = task
        .split(|c: char| c.is_whitespace())
        .filter(|w| !w.is_empty())
        .collect();
    let bare = |w: &str| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    for (i, _) in words.iter().enumerate() {
        for opener in CONSTRAINT_OPENERS {
            let parts: Vec<&str> = opener.split(' ').collect();
            if i + parts.len() > words.len()
                || !parts
                    .iter()
                    .enumerate()
                    .all(|(j, p)| bare(words[i + j]) == *p)
            {
                continue;
            }
            let mut phrase: Vec<&str> = Vec::new();
            for word in &words[i..] {
                if phrase.len() > parts.len() && PHRASE_ENDS.contains(&bare(word).as_str()) {
                    break;
                }
                let stop = word.ends_with([',', '.', ';', ':', '(', ')', '?', '!']);
                phrase.push(word.trim_end_matches([',', '.', ';', ':', '(', ')', '?', '!']));
                if stop || phrase.len() == CONSTRAINT_WORDS + parts.len() - 1 {
                    break;
                }
            }
            if phrase.len() > parts.len() {
                let phrase = phrase.join(" ");
                if !constraints.contains(&phrase) {
                    constraints.push(phrase);
                }
            }
        }
    }
    // A word of a constraint ("the 06:00 deadline", "new infrastructure") is a limit, not
    // what the task is about: left out of the keywords while others remain.
    let about: Vec<String> = keywords
        .iter()
        .filter(|keyword| {
            !constraints.iter().any(|constraint| {
                tokens(constraint)
                    .iter()
                    .any(|word| keyword.split(' ').any(|k| k == word))
            })
        })
        .cloned()
        .collect();
    if !about.is_empty() {
        keywords = about;
    }
    TaskTerms {
        keywords,
        constraints,
        numbers,
    }
}
