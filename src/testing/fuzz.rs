//! Fuzzing entry points: the bodies of the `cargo fuzz` targets in `fuzz/` and of their
//! stable smoke test, with the invariants they check.
//!
//! Owns: turning arbitrary bytes into tool arguments and thought trees, and the checks
//! that argument decoding ([`crate::tools::args`], the tools' `parse` and `decide_*`) and
//! the Mermaid escaper and renderer ([`crate::export::mermaid`]) hold for any input:
//! never panic; `"false"` never becomes true; integers stay in range; an escaped label
//! holds nothing that breaks Mermaid syntax and shows the text it came from; a diagram
//! has only the statement shapes the renderer writes, one node per thought and one edge
//! per graph edge. The checks panic on a violation (that is how a fuzzer sees it).
//!
//! The ledger file target ([`fuzz_ledger_file`]) holds the store to DESIGN §15 for any
//! bytes at `ledger.redb`: opening, checking, reading and exporting end with an answer,
//! never a panic, and a ledger found damaged takes no write.
//!
//! Must not: touch the network, or the file system beyond the one temporary directory a
//! ledger file target's input is written to, or be used by the server.

use crate::event::{CallRecord, Event, EventId, GENESIS_HASH, Payload, SessionId, SessionKind};
use crate::export::family::Exports;
use crate::export::mermaid::{
    CLASS_ANOMALY, CLASS_DEFS, EMPTY_NODE_ID, LABEL_BREAK, escape_label, is_unsafe_char, render,
};
use crate::projection::tree::ThoughtTree;
use crate::tools::ToolError;
use crate::tools::args::{Args, MAX_INTEGER, MAX_TEXT_BYTES};
use crate::tools::planning::payload::Body;
use crate::tools::planning::state::weighted_score;
use crate::tools::planning::{PlanArgs, decide_planning};
use crate::tools::qa::{QaStep, QaStepRecorded, Step, ToolRecommendation};
use crate::tools::thinking::{SequentialArgs, ThinkArgs, decide_sequential, decide_think};
use crate::tools::thinking::{SequentialThought, ThinkThought, ThinkingEvent};
use crate::tools::write::title_of;
use serde_json::{Map, Number, Value};

/// Most thoughts in a tree built from fuzz input (keeps one run fast).
pub(crate) const MAX_FUZZ_THOUGHTS: usize = 64;

/// Every argument name the thinking tools read, in both spellings, and deep_planning's.
const FIELD_NAMES: &[&str] = &[
    "thought",
    "nextThoughtNeeded",
    "next_thought_needed",
    "thoughtNumber",
    "thought_number",
    "totalThoughts",
    "total_thoughts",
    "isRevision",
    "is_revision",
    "revisesThought",
    "revises_thought",
    "branchFromThought",
    "branch_from_thought",
    "branchId",
    "branch_id",
    "needsMoreThoughts",
    "needs_more_thoughts",
    "sessionId",
    "session_id",
    "thread_purpose",
    "threadPurpose",
    "thought_index",
    "thoughtIndex",
    "tool_recommendation",
    "toolRecommendation",
    "left_to_be_done",
    "leftToBeDone",
    // deep_planning's (the phase is set by the check itself, to each phase in turn).
    "problem",
    "question",
    "name",
    "constraints",
    "pros",
    "feasibility",
    "risk",
    "recommendation",
    "selectedBranch",
    "steps",
    "risks",
    "format",
];

/// Strings that sit on the edges of the coercion policy.
const LOOKALIKES: &[&str] = &[
    "false",
    "False",
    "FALSE",
    "true",
    "TRUE",
    " true",
    "0",
    "1",
    "no",
    "yes",
    "",
    " ",
    "5",
    " 5 ",
    "+5",
    "-5",
    "05",
    "-0",
    "1e3",
    "0x10",
    "1.5",
    "2.0",
    "9007199254740991",
    "9007199254740992",
    "99999999999999999999999999999999",
    "NaN",
    "Infinity",
    "null",
    "\u{0}",
    "٣",
    "５",
];

/// Reads the fuzz input front to back.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let (first, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        *first
    }

    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |n, _| (n << 8) | u64::from(self.byte()))
    }

    /// A string: up to the next 0xFF byte, lossily decoded.
    fn text(&mut self) -> String {
        let end = self
            .0
            .iter()
            .position(|b| *b == 0xFF)
            .unwrap_or(self.0.len());
        let text = String::from_utf8_lossy(&self.0[..end]).into_owned();
        self.0 = self.0.get(end + 1..).unwrap_or(&[]);
        text
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One JSON value chosen by the input, biased towards the policy's edges.
fn value_from(bytes: &mut Bytes) -> Value {
    match bytes.byte() % 10 {
        0 => Value::Null,
        1 => Value::Bool(bytes.byte().is_multiple_of(2)),
        2 => Value::from(bytes.u64() as i64),
        3 => Number::from_f64(f64::from_bits(bytes.u64())).map_or(Value::Null, Value::Number),
        4 => Value::from(u64::from(bytes.byte()) + MAX_INTEGER - 128),
        5 | 6 => Value::from(LOOKALIKES[usize::from(bytes.byte()) % LOOKALIKES.len()]),
        7 => Value::from(bytes.text()),
        8 => Value::Array(vec![Value::from(u64::from(bytes.byte()))]),
        _ => Value::from(u64::from(bytes.byte() % 8)),
    }
}

/// Tool arguments from fuzz input: the input itself when it is a JSON object, else an
/// object whose fields (names the tools read) and values the bytes choose.
pub(crate) fn arguments_from_bytes(data: &[u8]) -> Map<String, Value> {
    if let Ok(Value::Object(map)) = serde_json::from_slice(data) {
        return map;
    }
    let mut bytes = Bytes(data);
    let mut map = Map::new();
    while !bytes.is_empty() && map.len() < FIELD_NAMES.len() {
        let name = FIELD_NAMES[usize::from(bytes.byte()) % FIELD_NAMES.len()];
        let value = value_from(&mut bytes);
        map.insert(name.to_string(), value);
    }
    map
}

/// Checks the decoders, both thinking tools' `parse` and `decide_*`, and deep_planning's
/// (`raw` with each phase in turn) over `raw`.
pub(crate) fn check_arguments(raw: &Map<String, Value>) {
    for (key, value) in raw {
        let Some(name) = FIELD_NAMES.iter().find(|name| **name == key) else {
            continue;
        };
        let names = [*name];
        let boolean = Args::new(raw).boolean(&names, false);
        let string_says = |wanted: &str| {
            value
                .as_str()
                .is_some_and(|s| s.eq_ignore_ascii_case(wanted))
        };
        match boolean {
            Some(true) => assert!(
                *value == Value::Bool(true) || string_says("true"),
                "{key}: {value} became true"
            ),
            Some(false) => assert!(
                *value == Value::Bool(false) || string_says("false"),
                "{key}: {value} became false"
            ),
            None => assert!(
                !string_says("false") && !string_says("true") && !value.is_boolean(),
                "{key}: {value} refused"
            ),
        }
        let integer = Args::new(raw).integer(&names, false, 1);
        if let Some(n) = integer {
            assert!((1..=MAX_INTEGER).contains(&n), "{key}: {value} became {n}");
            if let Some(text) = value.as_str() {
                let digits = text.trim().trim_start_matches(['+', '-']);
                assert!(
                    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()),
                    "{key}: {value:?} became {n}"
                );
            }
        } else if let Some(n) = value.as_u64() {
            assert!(n == 0 || n > MAX_INTEGER, "{key}: {n} refused");
        }
        if let Some(text) = Args::new(raw).string(&names, false) {
            assert_eq!(Some(text.as_str()), value.as_str());
            assert!(text.len() <= MAX_TEXT_BYTES);
        }
    }
    let call = || CallRecord {
        tool: "fuzz".into(),
        raw_arguments: Value::Object(raw.clone()).into(),
        duration_us: 0,
    };
    match SequentialArgs::parse("sequentialthinking", raw) {
        Ok(args) => {
            let t = &args.thought;
            assert!(t.thought_number >= 1 && t.total_thoughts >= t.thought_number);
            let given = first_of(raw, &["nextThoughtNeeded", "next_thought_needed"]);
            assert_eq!(
                t.next_thought_needed,
                given == Some(&Value::Bool(true))
                    || given
                        .and_then(Value::as_str)
                        .is_some_and(|s| s.eq_ignore_ascii_case("true"))
            );
            let events = decide_sequential(None, &args, call());
            assert_eq!(events.len(), 2);
            assert!(
                matches!(&events[0].payload, Payload::SessionStarted { title, .. } if *title == title_of(&t.thought))
            );
            assert!(
                matches!(events[1].payload.family(), Some(ThinkingEvent::ThoughtRecorded { thought, .. }) if thought == t)
            );
        }
        Err(error) => assert_validation(error, "sequentialthinking"),
    }
    match ThinkArgs::parse("think", raw) {
        Ok(args) => {
            assert!(args.thought.thought_index >= 1);
            let events = decide_think(None, &args, call());
            assert!(
                matches!(events[1].payload.family(), Some(ThinkingEvent::ThinkRecorded { thought, .. }) if *thought == args.thought)
            );
        }
        Err(error) => assert_validation(error, "think"),
    }
    for phase in crate::tools::planning::PHASES {
        let mut raw = raw.clone();
        raw.insert("phase".into(), Value::from(phase));
        match PlanArgs::parse(&raw) {
            Ok(args) => {
                assert_eq!(args.phase, phase);
                if let Body::BranchEvaluated(e) = &args.body {
                    assert!(e.criteria.iter().all(|c| (0.0..=10.0).contains(&c.score)));
                    assert_eq!(e.score, weighted_score(&e.criteria));
                    assert!((0.0..=10.0).contains(&e.score));
                }
                // Without a stored plan only init records (a new plan under its dp- id).
                match decide_planning(None, &args, call()) {
                    Ok(events) => {
                        assert_eq!(phase, "init");
                        assert!(matches!(
                            &events[0].payload,
                            Payload::SessionStarted { aliases, .. } if aliases[0].starts_with("dp-")
                        ));
                    }
                    Err(error) => {
                        assert_ne!(phase, "init");
                        assert_validation(error, "deep_planning");
                    }
                }
            }
            Err(error) => assert_validation(error, "deep_planning"),
        }
    }
}

fn first_of<'a>(raw: &'a Map<String, Value>, names: &[&str]) -> Option<&'a Value> {
    names.iter().find_map(|name| raw.get(*name))
}

fn assert_validation(error: ToolError, tool: &str) {
    let ToolError::Validation { problems, .. } = &error else {
        panic!("{tool}: not a validation error: {error}");
    };
    assert!(!problems.is_empty());
    assert!(
        error.to_string().starts_with(&format!(
            "Input validation error: Invalid arguments for tool {tool}: "
        )),
        "{error}"
    );
}

/// The whole argument-decoding target.
pub fn fuzz_arguments(data: &[u8]) {
    check_arguments(&arguments_from_bytes(data));
}

/// Undoes [`escape_label`] the way Mermaid draws a label: entities back to characters.
pub(crate) fn decode_label(escaped: &str) -> String {
    let mut out = String::new();
    let mut rest = escaped;
    while let Some(at) = rest.find('#') {
        out.push_str(&rest[..at]);
        let end = rest[at..].find(';').expect("every # starts an entity") + at;
        let name = &rest[at + 1..end];
        out.push(match name {
            "quot" => '"',
            "lt" => '<',
            "gt" => '>',
            "amp" => '&',
            digits => char::from_u32(digits.parse().expect("numeric entity")).expect("a char"),
        });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// What a label shows for `text`: the same chars, line breaks as spaces, unsafe chars
/// replaced.
pub(crate) fn shown_label(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\r' | '\t' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}' => ' ',
            c if is_unsafe_char(c) => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// Panics if an escaped label holds anything that could end the string, start a
/// comment, directive, link or markup, or reorder the text.
pub(crate) fn assert_label_inert(escaped: &str) {
    for bad in [
        '"', '<', '>', '&', '[', ']', '{', '}', '(', ')', '|', '`', '%', ':', '\\', '\n', '\r',
        '\t', '\u{2028}', '\u{2029}', 'ﬂ', '¶',
    ] {
        assert!(!escaped.contains(bad), "{bad:?} left in {escaped:?}");
    }
    if let Some(c) = escaped.chars().find(|c| is_unsafe_char(*c)) {
        panic!("unsafe {c:?} left in {escaped:?}");
    }
    for bad in ["-->", "%%", "\"]"] {
        assert!(!escaped.contains(bad), "{bad:?} left in {escaped:?}");
    }
    assert!(
        !escaped
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|word| word.eq_ignore_ascii_case("end")),
        "word end left in {escaped:?}"
    );
    // Every `#` starts an entity, and every `;` ends one.
    let mut rest = escaped;
    while let Some(at) = rest.find(['#', ';']) {
        assert_eq!(&rest[at..at + 1], "#", "stray ; in {escaped:?}");
        let end = rest[at..].find(';').expect("entity closed") + at;
        let name = &rest[at + 1..end];
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric()),
            "bad entity {name:?} in {escaped:?}"
        );
        rest = &rest[end + 1..];
    }
}

/// Escapes `text` and checks the label is inert and shows `text`.
pub(crate) fn check_label(text: &str) {
    let escaped = escape_label(text);
    assert_label_inert(&escaped);
    assert_eq!(
        decode_label(&escaped),
        shown_label(text),
        "round trip of {text:?}"
    );
}

/// The quoted strings of a diagram, in order.
pub(crate) fn quoted_strings(diagram: &str) -> Vec<&str> {
    diagram.split('"').skip(1).step_by(2).collect()
}

/// Quoted strings removed, what is left of a line.
fn skeleton(line: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in line.chars() {
        if c == '"' {
            quoted = !quoted;
            out.push('"');
        } else if !quoted {
            out.push(c);
        }
    }
    assert!(!quoted, "unbalanced quotes in {line:?}");
    out
}

fn is_id(text: &str, prefix: char) -> bool {
    text.strip_prefix(prefix)
        .is_some_and(|digits| !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
}

/// Checks every line of a diagram `render` wrote with `exports` is one of the forms it
/// writes (its class definitions: the core's and those renderers'), with all content in
/// quotes. Returns (node statements, edge statements, subgraphs).
pub(crate) fn check_mermaid_structure(diagram: &str, exports: &Exports) -> (usize, usize, usize) {
    let mut lines = diagram.lines();
    assert_eq!(lines.next(), Some("flowchart TD"));
    let (mut nodes, mut edges, mut subgraphs, mut open) = (0, 0, 0, 0usize);
    for line in lines {
        let shape = skeleton(line.trim_start());
        let words: Vec<&str> = shape.split(' ').collect();
        if shape.starts_with("%%") {
            assert!(
                shape
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || " %-(),:".contains(c)),
                "comment holds only generated text: {line:?}"
            );
        } else if shape.starts_with("classDef ") {
            assert!(
                CLASS_DEFS
                    .iter()
                    .chain(exports.renders().iter().flat_map(|r| r.mermaid_classes()))
                    .any(|(class, style)| shape == format!("classDef {class} {style}"))
            );
        } else if shape.starts_with("class ") {
            assert_eq!(words.len(), 3);
            assert!(words[1].split(',').all(|id| is_id(id, 't')));
            assert_eq!(words[2], CLASS_ANOMALY);
        } else if words[0] == "subgraph" {
            assert_eq!(words.len(), 3, "{line:?}");
            assert!(is_id(words[1], 'b'));
            assert_eq!(words[2], "[\"\"]");
            subgraphs += 1;
            open += 1;
        } else if shape == "end" {
            open = open.checked_sub(1).expect("end closes a subgraph");
        } else if words.len() == 3 && (words[0] == "r0" || is_id(words[0], 'g')) {
            // An agent node's edge: trunk or parent node → node.
            assert!(is_id(words[2], 'g') && words[1] == "-->", "{line:?}");
            edges += 1;
        } else if words.len() == 3 && words[0] == "p0" {
            // A plan's edge: problem → approach.
            assert!(is_id(words[2], 'a') && words[1] == "-->", "{line:?}");
            edges += 1;
        } else if words.len() == 3 {
            assert!(is_id(words[0], 't') && is_id(words[2], 't'), "{line:?}");
            assert!(
                matches!(words[1], "-->" | "-.->|revises|" | "-->|\"\"|"),
                "{line:?}"
            );
            edges += 1;
        } else {
            assert_eq!(words.len(), 1, "{line:?}");
            let (id, rest) = shape.split_once('[').expect("node statement");
            if id == "r0" || is_id(id, 'g') {
                // An agent session's trunk or branch node: not a thought.
                assert!(
                    matches!(rest, "\"\"]:::trunk" | "\"\"]:::node" | "\"\"]:::lowconf"),
                    "{line:?}"
                );
                continue;
            }
            if id == "p0" || is_id(id, 'a') {
                // A plan's problem or approach: not a thought, not counted as one.
                assert!(
                    matches!(
                        rest,
                        "\"\"]:::problem" | "\"\"]:::approach" | "\"\"]:::selected"
                    ),
                    "{line:?}"
                );
                continue;
            }
            assert!(is_id(id, 't') || id == EMPTY_NODE_ID, "{line:?}");
            assert!(
                matches!(
                    rest,
                    "\"\"]"
                        | "\"\"]:::revision"
                        | "\"\"]:::branch"
                        | "\"\"]:::think"
                        | "\"\"]:::empty"
                ),
                "{line:?}"
            );
            nodes += 1;
        }
    }
    assert_eq!(open, 0, "every subgraph is closed");
    (nodes, edges, subgraphs)
}

/// A session built from fuzz input: each thought's kind, numbers, references and texts
/// chosen by the bytes (dangling references, self references and repeated branch ids
/// included).
pub(crate) fn tree_from_bytes(data: &[u8]) -> ThoughtTree {
    let mut bytes = Bytes(data);
    let session = SessionId::generate();
    let mode = bytes.byte() % 4;
    let think = mode == 0;
    // A verification session: its steps carry a target and tool names from the input.
    let qa = mode == 1;
    let title = bytes.text();
    let kind = if think {
        SessionKind::THINK
    } else if qa {
        SessionKind::QA
    } else {
        SessionKind::THINKING
    };
    let mut payloads = vec![Payload::SessionStarted {
        kind,
        title,
        aliases: Vec::new(),
    }];
    let small = |bytes: &mut Bytes| u64::from(bytes.byte() % 12);
    while !bytes.is_empty() && payloads.len() <= MAX_FUZZ_THOUGHTS {
        let call = CallRecord {
            tool: "fuzz".into(),
            raw_arguments: Value::Null.into(),
            duration_us: 0,
        };
        let flags = bytes.byte();
        let number = small(&mut bytes).max(1);
        let payload = if think {
            ThinkingEvent::ThinkRecorded {
                thought: ThinkThought {
                    thread_purpose: bytes.text(),
                    thought: bytes.text(),
                    thought_index: number,
                    tool_recommendation: bytes.text(),
                    left_to_be_done: String::new(),
                    open_items: Vec::new(),
                },
                call,
            }
        } else {
            let revises = small(&mut bytes);
            let from = small(&mut bytes);
            ThinkingEvent::ThoughtRecorded {
                thought: SequentialThought {
                    thought: bytes.text(),
                    thought_number: number,
                    total_thoughts: number + small(&mut bytes),
                    next_thought_needed: flags & 1 == 0,
                    is_revision: (flags & 2 != 0).then_some(flags & 4 != 0),
                    revises_thought: (revises > 0).then_some(revises),
                    branch_from_thought: (from > 0).then_some(from),
                    branch_id: (flags & 8 != 0).then(|| bytes.text()),
                    needs_more_thoughts: None,
                },
                call,
            }
        };
        let payload = match payload {
            ThinkingEvent::ThoughtRecorded { thought, call } if qa => {
                let tool = |bytes: &mut Bytes| ToolRecommendation {
                    tool_name: bytes.text(),
                    confidence: 0.5,
                    rationale: String::new(),
                    priority: 1,
                    alternatives: Vec::new(),
                    suggested_inputs: None,
                };
                let step = |tools: Vec<ToolRecommendation>| Step {
                    step_description: String::new(),
                    expected_outcome: String::new(),
                    recommended_tools: tools,
                    next_step_conditions: Vec::new(),
                    revise_when: Vec::new(),
                    branch_when: Vec::new(),
                };
                let (used, next) = (tool(&mut bytes), tool(&mut bytes));
                Payload::from(QaStepRecorded {
                    step: QaStep {
                        thought,
                        verification_target: (flags & 16 != 0).then(|| bytes.text()),
                        workflow: bytes.text(),
                        current_step: (flags & 32 != 0).then(|| step(vec![used])),
                        recommended_next_step: (flags & 64 != 0).then(|| step(vec![next])),
                        invalid_recommendations: Vec::new(),
                        remaining_steps: Vec::new(),
                    },
                    call,
                })
            }
            other => Payload::from(other),
        };
        payloads.push(payload);
    }
    let events = payloads.into_iter().enumerate().map(|(i, payload)| Event {
        id: EventId::generate(),
        session,
        seq: i as u64 + 1,
        at: 1_700_000_000_000,
        schema: 1,
        actor: None,
        payload,
        prev: GENESIS_HASH.into(),
        hash: GENESIS_HASH.into(),
    });
    ThoughtTree::build(session, events, &crate::tools::folds())
}

/// Renders `tree` with `exports` and checks the diagram's shape, counts and labels.
pub(crate) fn check_render(tree: &ThoughtTree, exports: &Exports) {
    let diagram = render(tree, exports);
    let (nodes, edges, subgraphs) = check_mermaid_structure(&diagram, exports);
    // An empty session is drawn as one placeholder node, unless a family draws nodes of
    // its own (a plan's).
    let family_nodes = exports
        .renders()
        .iter()
        .any(|r| r.mermaid_nodes(tree, &mut String::new()));
    let expected_nodes = if family_nodes {
        tree.order.len()
    } else {
        tree.order.len().max(1)
    };
    assert_eq!(nodes, expected_nodes, "{diagram}");
    assert_eq!(
        edges,
        tree.edges().len()
            + exports
                .renders()
                .iter()
                .map(|r| r.mermaid_edges(tree))
                .sum::<usize>(),
        "{diagram}"
    );
    assert_eq!(subgraphs, tree.branches.len(), "{diagram}");
    for label in quoted_strings(&diagram) {
        assert_label_inert(&label.replace(LABEL_BREAK, " "));
    }
}

/// The whole Mermaid target: the input as one label, then as a tree.
pub fn fuzz_mermaid(data: &[u8]) {
    check_label(&String::from_utf8_lossy(data));
    check_render(&tree_from_bytes(data), &crate::tools::exports());
}

/// The ledger file target: `data` as `ledger.redb` in a directory of its own, opened,
/// checked as `verify` does, every session read whole and exported as JSONL; when the
/// check finds damage (what stops writes: not a summary a rebuild mends), a write is
/// refused. Panics only when one of those panics outside
/// the store's containment or a write goes through after damage was found.
pub fn fuzz_ledger_file(data: &[u8]) {
    use crate::event::NewEvent;
    use crate::store::Ledger;
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join(crate::store::LEDGER_FILE_NAME), data)
        .expect("the input written");
    // Salvage first: it reads the bytes as they are, before any open could touch them.
    if let Ok(found) = crate::store::salvage::salvage_dir(dir.path(), crate::tools::families()) {
        let chains = crate::store::salvage::chains(found.events, &found.heads);
        for chain in &chains {
            let mut prev = GENESIS_HASH.to_string();
            for (n, event) in chain.kept.iter().enumerate() {
                assert_eq!(event.seq, n as u64 + 1, "a kept chain is gapless");
                assert_eq!(event.prev, prev, "a kept chain chains");
                assert_eq!(event.computed_hash(), event.hash, "a kept event verifies");
                prev = event.hash.clone();
            }
        }
    }
    let Ok(ledger) = Ledger::open_existing(dir.path(), crate::tools::families()) else {
        return;
    };
    let damaged = match ledger.check_all(|_, _| {}) {
        Ok(check) => check.is_damaged(),
        Err(_) => true,
    };
    if let Ok(heads) = ledger.heads() {
        for head in heads {
            if let Ok(events) = ledger.events(head.session, 1, head.seq) {
                let _ = crate::export::jsonl(&events);
            }
            let _ = crate::query::load_tree(&ledger, &head, None);
        }
    }
    let _ = ledger.undecodable_heads();
    let _ = ledger.events_from_position(1, 100);
    if damaged {
        let session = SessionId::generate();
        let written = ledger.write_blocking(move |txn| {
            txn.append(
                session,
                0,
                vec![NewEvent::new(Payload::SessionStarted {
                    kind: SessionKind::THINKING,
                    title: "fuzz".into(),
                    aliases: Vec::new(),
                })],
            )
            .map(drop)
        });
        assert!(
            !matches!(written, Ok(Ok(()))),
            "a write went through after the check found damage"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::qa::node::QaNode;

    /// Fragments the generator splices together so that short random inputs still hit
    /// the interesting paths (JSON objects, look-alike strings, Mermaid syntax).
    const PIECES: &[&[u8]] = &[
        b"{\"thought\":\"",
        b"\",\"nextThoughtNeeded\":",
        b"\"false\"",
        b"\"False\"",
        b",\"thoughtNumber\":",
        b"\" 5 \"",
        b"1e3",
        b"-0",
        b"}",
        b"end",
        b"\"]",
        b"-->",
        b"%%{init}",
        b"#quot;",
        "\u{202E}".as_bytes(),
        "\u{200D}".as_bytes(),
        "🌿".as_bytes(),
        b"\r\n",
        b"\0",
        b"\xff",
        b"\xc3",
    ];

    /// xorshift64: deterministic, no crate.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn input(&mut self) -> Vec<u8> {
            let mut out = Vec::new();
            for _ in 0..self.next() % 24 {
                let pick = self.next();
                if pick.is_multiple_of(3) {
                    out.extend_from_slice(PIECES[(pick >> 8) as usize % PIECES.len()]);
                } else {
                    out.extend((0..pick % 6).map(|_| self.next() as u8));
                }
            }
            out
        }
    }

    /// Inputs per target: a few thousand, within a second or two in a debug build.
    const SMOKE_INPUTS: usize = 3_000;

    #[test]
    fn fuzz_targets_hold_their_invariants_over_pseudo_random_inputs() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let mut qa_tools = 0;
        for _ in 0..SMOKE_INPUTS {
            let input = rng.input();
            fuzz_arguments(&input);
            fuzz_mermaid(&input);
            let tree = tree_from_bytes(&input);
            qa_tools += tree
                .thoughts()
                .filter_map(|node| node.data::<QaNode>())
                .filter(|qa| !qa.used_tools.is_empty() || !qa.recommended_tools.is_empty())
                .count();
        }
        assert!(
            qa_tools > 0,
            "the inputs reach verification steps with tools"
        );
    }

    /// Damaged copies of the checked-in ledger of every family the smoke test tries.
    const LEDGER_SMOKE_INPUTS: usize = 120;

    #[test]
    fn the_ledger_file_target_holds_over_damaged_copies_of_a_real_ledger() {
        let original = std::fs::read("tests/fixtures/ledger-v2/ledger.redb").unwrap();
        let mut rng = XorShift(0xD1B5_4A32_D192_ED03);
        fuzz_ledger_file(&original);
        fuzz_ledger_file(&[]);
        // Found by the fuzzer: a head row whose summary still decodes but differs from its
        // log (derived state a rebuild mends, which stops no write).
        // Every head row's thought count changed (the live ones among the stale copies).
        let mut summary = original.clone();
        let key = b"\"thoughts\":";
        let mut changed = 0;
        for at in 0..summary.len() - key.len() {
            if &summary[at..at + key.len()] == key {
                let digit = &mut summary[at + key.len()];
                *digit = if *digit == b'7' { b'8' } else { b'7' };
                changed += 1;
            }
        }
        assert!(changed > 0, "head rows found");
        fuzz_ledger_file(&summary);
        for _ in 0..LEDGER_SMOKE_INPUTS {
            let mut bytes = original.clone();
            match rng.next() % 4 {
                0 => bytes.truncate(rng.next() as usize % original.len()),
                1 => {
                    let at = rng.next() as usize % bytes.len();
                    bytes[at] ^= 1 << (rng.next() % 8);
                }
                _ => {
                    let at = rng.next() as usize % bytes.len();
                    let len = (1 + rng.next() as usize % 256).min(bytes.len() - at);
                    for byte in &mut bytes[at..at + len] {
                        *byte = rng.next() as u8;
                    }
                }
            }
            fuzz_ledger_file(&bytes);
        }
    }

    #[test]
    fn fuzz_arguments_sees_false_strings_and_json_objects() {
        // The generator reaches the paths the invariants are about.
        let raw = arguments_from_bytes(br#"{"thought":"t","nextThoughtNeeded":"False","thoughtNumber":" 5 ","totalThoughts":1}"#);
        let args = SequentialArgs::parse("sequentialthinking", &raw).unwrap();
        assert!(!args.thought.next_thought_needed);
        assert_eq!(args.thought.total_thoughts, 5);
        check_arguments(&raw);
        let built = arguments_from_bytes(&[1, 5, 0, 3, 7, b'x', 0xFF]);
        assert!(!built.is_empty());
        check_arguments(&built);
    }
}
