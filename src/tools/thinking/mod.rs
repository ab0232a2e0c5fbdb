//! The thinking toolset: `sequentialthinking` (alias `sequential_thinking`) and `think`,
//! as `specs/thinking.md` describes them, recorded durably.
//!
//! Owns: the family's registration ([`FAMILY`]), its tools' definitions, argument
//! parsing, the pure [`decide_sequential`] and [`decide_think`], the answers, and the
//! stderr box; its events, codec and folds are in [`payload`]. Must not: write stdout,
//! keep any state but the process's current sessions (per caller; `think`'s per thread
//! purpose too), or answer before the commit.

pub(crate) mod payload;

use super::args::{Args, MAX_ID_BYTES, boolean_schema, count_schema, described, finish};
use super::write::{Target, mark_started, started_hint, with_start};
use super::{
    CallFuture, Family, KindInfo, ToolError, structured_result, tool_definition,
    writing_annotations,
};
use crate::event::{CallRecord, NewEvent, SessionKind};
use crate::request::ToolCall;
use crate::store::SessionHead;
pub(crate) use payload::ThinkThought;
pub(crate) use payload::{SequentialThought, ThinkingEvent};
use rmcp::model::{CallToolResult, ContentBlock as Content, Tool};
use serde_json::{Map, Value, json};

impl SessionKind {
    /// A `sequentialthinking` session.
    pub const THINKING: SessionKind = SessionKind::new("thinking");
    /// A `think` thread.
    pub const THINK: SessionKind = SessionKind::new("think");
}

/// The thinking family, as registered in [`super::FAMILIES`].
pub(crate) static FAMILY: Family = Family {
    name: "thinking",
    instructions: "thinking (step-by-step reasoning with revisions and branches)",
    default_on: true,
    listing_budget_bytes: 2_120,
    tools,
    aliases: &[SEQUENTIAL_ALIAS],
    call,
    asks_the_client: false,
    kinds: &[
        KindInfo {
            kind: SessionKind::THINKING,
            label: "Thinking session",
        },
        KindInfo {
            kind: SessionKind::THINK,
            label: "Think thread",
        },
    ],
    codec: Some(&payload::THINKING_CODEC),
    folds: &[&crate::projection::tree::FoldOf::<payload::ThinkingEvent>::NEW],
    picture: None,
    render: None,
    prompts: &[],
    doctor: None,
};

fn call(call: ToolCall) -> CallFuture {
    Box::pin(async move {
        if call.name == THINK {
            call_think(call).await.map(Into::into)
        } else {
            call_sequential(call).await.map(Into::into)
        }
    })
}

/// Name the reference server lists.
pub(crate) const SEQUENTIAL: &str = "sequentialthinking";
/// Accepted alias (other servers' spelling); not listed, to keep `tools/list` small.
pub(crate) const SEQUENTIAL_ALIAS: &str = "sequential_thinking";
pub(crate) const THINK: &str = "think";

/// The reference server's guidance in fewer words: when to use it (the first line), its
/// features and parameters (the items name the arguments they use), and the "You
/// should" list. Every byte of it is sent with every model request (`tools/list`); how a
/// session persists and continues (`sessionId`) is said once for every tool, in the
/// server instructions.
const SEQUENTIAL_DESCRIPTION: &str =
    "For complex problems, changing plans or unclear scope; one thought per call.
You should:
1. Estimate totalThoughts; adjust it, or exceed it (needsMoreThoughts).
2. Question and revise thoughts (isRevision, revisesThought).
3. Branch for alternatives (branchFromThought, branchId).
4. Form and verify a hypothesis.
5. Set nextThoughtNeeded false only when done and correct.";

/// The original `think` tool's guidance (a log of reasoning and plans that fetches and
/// changes nothing), with how threads start and continue.
const THINK_DESCRIPTION: &str = "Log a reasoning step or to-do list; changes nothing. Per user message, start a thread (new thread_purpose, thought_index 1); continue: same purpose, next index.";

/// The tools of this family, as listed.
pub(crate) fn tools() -> Vec<Tool> {
    vec![sequential_tool(), think_tool()]
}

fn sequential_tool() -> Tool {
    let text = json!({"type": "string"});
    let input = json!({
        "type": "object",
        "properties": {
            "thought": text,
            "nextThoughtNeeded": boolean_schema(),
            "thoughtNumber": count_schema(),
            "totalThoughts": count_schema(),
            "isRevision": boolean_schema(),
            "revisesThought": count_schema(),
            "branchFromThought": count_schema(),
            "branchId": text,
            "needsMoreThoughts": boolean_schema(),
            "sessionId": text
        },
        "required": ["thought", "nextThoughtNeeded", "thoughtNumber", "totalThoughts"]
    });
    // Declared as the reference declares it (clients that type structured content rely
    // on it), with our sessionId and eventSeq.
    let output = json!({
        "type": "object",
        "properties": {
            "thoughtNumber": {"type": "integer"},
            "totalThoughts": {"type": "integer"},
            "nextThoughtNeeded": {"type": "boolean"},
            "branches": {"type": "array", "items": {"type": "string"}},
            "thoughtHistoryLength": {"type": "integer"},
            "sessionId": {"type": "string"},
            "eventSeq": {"type": "integer"}
        },
        "required": ["thoughtNumber", "totalThoughts", "nextThoughtNeeded", "branches", "thoughtHistoryLength", "sessionId", "eventSeq"]
    });
    tool_definition(
        SEQUENTIAL,
        Some("Sequential Thinking"),
        SEQUENTIAL_DESCRIPTION,
        input,
        Some(output),
        writing_annotations(),
    )
}

fn think_tool() -> Tool {
    let text = json!({"type": "string"});
    let input = json!({
        "type": "object",
        "properties": {
            "thread_purpose": text,
            "thought": text,
            "thought_index": count_schema(),
            "tool_recommendation": text,
            "left_to_be_done": described(text.clone(), "One item per line"),
            "session_id": text
        },
        "required": ["thread_purpose", "thought", "thought_index"]
    });
    // No output schema: the text is the original's; the structured content is extra. No
    // title: the original has none, and "Think" would only repeat the name.
    tool_definition(
        THINK,
        None,
        THINK_DESCRIPTION,
        input,
        None,
        writing_annotations(),
    )
}

/// A validated `sequentialthinking` call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SequentialArgs {
    pub thought: SequentialThought,
    pub session_id: Option<String>,
}

impl SequentialArgs {
    /// Decodes the arguments with the coercion policy; every problem is reported at once.
    pub(crate) fn parse(tool: &str, raw: &Map<String, Value>) -> Result<Self, ToolError> {
        let mut args = Args::new(raw);
        let thought = thought_fields(&mut args, Spelling::Camel);
        let session_id = args.string_limited(&["sessionId", "session_id"], false, MAX_ID_BYTES);
        finish(tool, args)?;
        Ok(SequentialArgs {
            thought: thought.expect("required fields are reported as problems when missing"),
            session_id,
        })
    }

    /// A first thought that is neither a revision nor a branch starts a new session.
    pub(crate) fn starts_session(&self) -> bool {
        starts_session(&self.thought)
    }
}

/// Which spelling of the thought fields a tool lists (and names in its errors); the
/// other spelling is accepted too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spelling {
    /// `thoughtNumber` (sequentialthinking, as the reference lists it).
    Camel,
    /// `thought_number` (sequentialthinking_qa, as its seed lists it).
    Snake,
}

impl Spelling {
    fn names(self, camel: &'static str, snake: &'static str) -> [&'static str; 2] {
        match self {
            Spelling::Camel => [camel, snake],
            Spelling::Snake => [snake, camel],
        }
    }
}

/// Reads the sequential-thinking fields every thought-recording tool shares (`thought`,
/// the numbers, revision and branch fields) with the coercion policy. `None` when a
/// problem was recorded in `args`; the total is raised to the thought number (the
/// reference's rule).
pub(crate) fn thought_fields(args: &mut Args<'_>, spelling: Spelling) -> Option<SequentialThought> {
    let names = |camel, snake| spelling.names(camel, snake);
    let thought = args.string(&["thought"], true);
    let next_thought_needed =
        args.boolean(&names("nextThoughtNeeded", "next_thought_needed"), true);
    let thought_number = args.integer(&names("thoughtNumber", "thought_number"), true, 1);
    let total_thoughts = args.integer(&names("totalThoughts", "total_thoughts"), true, 1);
    let is_revision = args.boolean(&names("isRevision", "is_revision"), false);
    let revises_thought = args.integer(&names("revisesThought", "revises_thought"), false, 1);
    let branch_from_thought =
        args.integer(&names("branchFromThought", "branch_from_thought"), false, 1);
    let branch_id = args.string_limited(&names("branchId", "branch_id"), false, MAX_ID_BYTES);
    let needs_more_thoughts =
        args.boolean(&names("needsMoreThoughts", "needs_more_thoughts"), false);
    if args.has_problems() {
        return None;
    }
    let (Some(thought), Some(next_thought_needed), Some(thought_number), Some(total_thoughts)) =
        (thought, next_thought_needed, thought_number, total_thoughts)
    else {
        unreachable!("required fields are reported as problems when missing");
    };
    Some(SequentialThought {
        thought,
        thought_number,
        total_thoughts: total_thoughts.max(thought_number),
        next_thought_needed,
        is_revision,
        revises_thought,
        branch_from_thought,
        branch_id,
        needs_more_thoughts,
    })
}

/// A first thought that is neither a revision nor a branch starts a new session.
pub(crate) fn starts_session(thought: &SequentialThought) -> bool {
    thought.thought_number == 1
        && thought.is_revision != Some(true)
        && thought.revises_thought.is_none()
        && thought.branch().is_none()
}

/// Pure: the events one `sequentialthinking` call appends to the session at `head`
/// (`None`: a new session, which gets its `session_started` first).
pub(crate) fn decide_sequential(
    head: Option<&SessionHead>,
    args: &SequentialArgs,
    call: CallRecord,
) -> Vec<NewEvent> {
    with_start(
        head,
        SessionKind::THINKING,
        &args.thought.thought,
        [ThinkingEvent::ThoughtRecorded {
            thought: args.thought.clone(),
            call,
        }
        .into()],
    )
}

/// A thought on a branch `close_branch` ended is refused: the branch has its conclusion
/// (read from the head inside the transaction, so a close committed by another process
/// counts).
fn refuse_closed_branch(
    head: Option<&SessionHead>,
    args: &SequentialArgs,
) -> Result<(), ToolError> {
    let Some((branch, _)) = args.thought.branch() else {
        return Ok(());
    };
    if head.is_some_and(|h| h.summary.branch_closed(branch)) {
        return Err(ToolError::validation(
            SEQUENTIAL,
            vec![format!(
                "branchId: branch {branch:?} was closed with a conclusion (close_branch) and takes no more thoughts; continue on the main line, merge it with merge_branch, or open a new branch"
            )],
        ));
    }
    Ok(())
}

/// Handles one `sequentialthinking` call: parse, decide and append on the writer thread,
/// answer after the commit.
/// Members every `sequentialthinking` answer holds; a session's first thought adds
/// `started`, `sessionHint` and perhaps `related` (the map grows then). Sized for the
/// common answer: room for all ten would take a map's entries past 1 KiB, an allocation
/// that makes glibc's malloc sweep its fast bins first on every call.
const SEQUENTIAL_ANSWER_FIELDS: usize = 7;

pub(crate) async fn call_sequential(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    // Errors name the listed tool, as the reference's text does, whatever alias was used.
    let args = SequentialArgs::parse(SEQUENTIAL, &call.arguments)?;
    let target = Target {
        kind: SessionKind::THINKING,
        field: "sessionId",
        named: args.session_id.clone(),
        continue_key: (!args.starts_session()).then(String::new),
        remember_key: String::new(),
        idempotency_key: None,
    };
    let recorded = {
        let args = args.clone();
        call.try_record(target, move |head, record| {
            refuse_closed_branch(head, &args)?;
            Ok(decide_sequential(head, &args, record))
        })
        .await?
    };
    if call.ctx.log_thoughts {
        log_thought_box(&args.thought);
    }
    let summary = &recorded.head.summary;
    // Built into a map of its final size (`json!` grows one member at a time, and this
    // runs on every thought).
    let mut fields = Map::with_capacity(SEQUENTIAL_ANSWER_FIELDS);
    fields.insert("thoughtNumber".into(), args.thought.thought_number.into());
    fields.insert("totalThoughts".into(), args.thought.total_thoughts.into());
    fields.insert(
        "nextThoughtNeeded".into(),
        args.thought.next_thought_needed.into(),
    );
    fields.insert("branches".into(), summary.branches.clone().into());
    fields.insert("thoughtHistoryLength".into(), summary.thoughts.into());
    fields.insert("sessionId".into(), recorded.session.to_string().into());
    fields.insert("eventSeq".into(), recorded.seq.into());
    let mut answer = Value::Object(fields);
    mark_started(
        &mut answer,
        &recorded,
        &recorded.session.to_string(),
        "sessionId",
    );
    if args.starts_session() && recorded.seq == 2 {
        let (ledger, text) = (&call.ctx.ledger, &args.thought.thought);
        crate::recall::attach_related(ledger, text, recorded.session, &mut answer).await;
    }
    Ok(structured_result(answer))
}

/// The box the reference server draws on stderr for each thought.
pub(crate) fn thought_box(thought: &SequentialThought) -> String {
    let position = format!("{}/{}", thought.thought_number, thought.total_thoughts);
    let header = if thought.is_revision == Some(true) {
        match thought.revises_thought {
            Some(r) => format!("🔄 Revision {position} (revising thought {r})"),
            None => format!("🔄 Revision {position}"),
        }
    } else if let Some(from) = thought.branch_from_thought {
        match thought.branch_id.as_deref() {
            Some(id) => format!("🌿 Branch {position} (from thought {from}, ID: {id})"),
            None => format!("🌿 Branch {position} (from thought {from})"),
        }
    } else {
        format!("💭 Thought {position}")
    };
    // Widths in UTF-16 units, as the reference (JavaScript) measures them.
    let width = |s: &str| s.encode_utf16().count();
    let text_width = width(&thought.thought);
    let border_len = width(&header).max(text_width) + 4;
    let border = "─".repeat(border_len);
    let padding = (border_len - 2).saturating_sub(text_width);
    // "\n┌{border}┐\n│ {header} │\n├{border}┤\n│ {thought}{padding} │\n└{border}┘", pieced
    // together without the formatting machinery (this runs on every thought).
    let mut text = String::with_capacity(
        3 * border.len() + header.len() + thought.thought.len() + padding + 40,
    );
    for piece in [
        "\n┌",
        &border,
        "┐\n│ ",
        &header,
        " │\n├",
        &border,
        "┤\n│ ",
        &thought.thought,
    ] {
        text.push_str(piece);
    }
    text.extend(std::iter::repeat_n(' ', padding));
    for piece in [" │\n└", &border, "┘"] {
        text.push_str(piece);
    }
    text
}

/// Writes [`thought_box`] and its line end to stderr in one `write` (what the reference
/// logs for each thought; `eprintln!` would write the line end on its own). A closed
/// stderr is not the call's failure.
pub(crate) fn log_thought_box(thought: &SequentialThought) {
    let mut text = thought_box(thought);
    text.push('\n');
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
}

/// A validated `think` call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ThinkArgs {
    pub thought: ThinkThought,
    /// Whether the client named a tool (absent means the default "None").
    pub recommendation_given: bool,
    pub session_id: Option<String>,
}

impl ThinkArgs {
    pub(crate) fn parse(tool: &str, raw: &Map<String, Value>) -> Result<Self, ToolError> {
        let mut args = Args::new(raw);
        let thread_purpose = args.string(&["thread_purpose", "threadPurpose"], true);
        let thought = args.string(&["thought"], true);
        let thought_index = args.integer(&["thought_index", "thoughtIndex"], true, 1);
        let tool_recommendation =
            args.string(&["tool_recommendation", "toolRecommendation"], false);
        let left_to_be_done = args.string(&["left_to_be_done", "leftToBeDone"], false);
        let session_id = args.string_limited(&["session_id", "sessionId"], false, MAX_ID_BYTES);
        finish(tool, args)?;
        let (Some(thread_purpose), Some(thought), Some(thought_index)) =
            (thread_purpose, thought, thought_index)
        else {
            unreachable!("required fields are reported as problems when missing");
        };
        let recommendation_given = tool_recommendation.is_some();
        let left_to_be_done = left_to_be_done.unwrap_or_else(|| "None".to_string());
        Ok(ThinkArgs {
            thought: ThinkThought {
                thread_purpose,
                thought,
                thought_index,
                tool_recommendation: tool_recommendation.unwrap_or_else(|| "None".to_string()),
                open_items: open_items(&left_to_be_done),
                left_to_be_done,
            },
            recommendation_given,
            session_id,
        })
    }

    /// The recommended tool to mention in the answer, if any.
    pub(crate) fn recommended_tool(&self) -> Option<&str> {
        let rec = self.thought.tool_recommendation.as_str();
        (self.recommendation_given && !rec.trim().eq_ignore_ascii_case("none")).then_some(rec)
    }
}

/// Splits `left_to_be_done` into items: one per line (bullets and numbering removed), or
/// `;`-separated on a single line. "None" and blank give no items.
pub(crate) fn open_items(text: &str) -> Vec<String> {
    let trimmed = text.trim();
    if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("none") {
        return Vec::new();
    }
    let pieces: Vec<&str> = if trimmed.contains('\n') {
        trimmed.lines().collect()
    } else {
        trimmed.split(';').collect()
    };
    pieces
        .into_iter()
        .map(strip_bullet)
        .filter(|item| !item.is_empty())
        .map(String::from)
        .collect()
}

fn strip_bullet(line: &str) -> &str {
    let line = line.trim();
    let line = line
        .strip_prefix("- ")
        .or_else(|| line.strip_prefix("* "))
        .or_else(|| line.strip_prefix("• "))
        .unwrap_or(line);
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        let rest = &line[digits..];
        if let Some(rest) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return rest.trim();
        }
    }
    line.trim()
}

/// Pure: the events one `think` call appends (a new thread gets `session_started`).
pub(crate) fn decide_think(
    head: Option<&SessionHead>,
    args: &ThinkArgs,
    call: CallRecord,
) -> Vec<NewEvent> {
    with_start(
        head,
        SessionKind::THINK,
        &args.thought.thread_purpose,
        [ThinkingEvent::ThinkRecorded {
            thought: args.thought.clone(),
            call,
        }
        .into()],
    )
}

/// Handles one `think` call.
pub(crate) async fn call_think(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    let args = ThinkArgs::parse(&call.name, &call.arguments)?;
    let purpose = args.thought.thread_purpose.clone();
    let target = Target {
        kind: SessionKind::THINK,
        field: "session_id",
        named: args.session_id.clone(),
        continue_key: (args.thought.thought_index != 1).then(|| purpose.clone()),
        remember_key: purpose,
        idempotency_key: None,
    };
    let recorded = {
        let args = args.clone();
        call.record(target, move |head, record| {
            decide_think(head, &args, record)
        })
        .await?
    };
    let mut text = format!(
        "Thread purpose: {}\nThought {} logged.",
        args.thought.thread_purpose, args.thought.thought_index
    );
    if let Some(rec) = args.recommended_tool() {
        text.push_str(&format!(" Recommended tool: {rec}."));
    }
    let session = recorded.session.to_string();
    if recorded.started {
        text.push('\n');
        text.push_str(&started_hint(&session, "session_id"));
    }
    let mut structured = json!({
        "sessionId": session,
        "eventSeq": recorded.seq,
        "threadPurpose": args.thought.thread_purpose,
        "thoughtIndex": args.thought.thought_index,
        "recommendedTool": args.recommended_tool(),
        "openItems": args.thought.open_items,
    });
    mark_started(&mut structured, &recorded, &session, "session_id");
    let mut result = CallToolResult::success(vec![Content::text(text)]);
    result.structured_content = Some(structured);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_headers_never_print_undefined() {
        let mut thought = crate::projection::fixtures::seq_thought("first", 1, 3);
        assert_eq!(
            thought_box(&thought),
            "\n┌──────────────────┐\n│ 💭 Thought 1/3 │\n├──────────────────┤\n│ first            │\n└──────────────────┘"
        );
        thought.is_revision = Some(true);
        assert!(thought_box(&thought).contains("🔄 Revision 1/3 │"));
        thought.is_revision = None;
        thought.branch_from_thought = Some(1);
        assert!(thought_box(&thought).contains("🌿 Branch 1/3 (from thought 1) │"));
    }

    #[test]
    fn the_box_is_the_formatted_one_for_short_long_and_wide_thoughts() {
        // The box as `format!` drew it before it was pieced together by hand.
        fn formatted(header: &str, text: &str) -> String {
            let width = |s: &str| s.encode_utf16().count();
            let border_len = width(header).max(width(text)) + 4;
            let border = "─".repeat(border_len);
            let padding = " ".repeat((border_len - 2).saturating_sub(width(text)));
            format!("\n┌{border}┐\n│ {header} │\n├{border}┤\n│ {text}{padding} │\n└{border}┘")
        }
        for text in ["", "a", "first", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🌿 wide", &"long ".repeat(40)]
        {
            let mut thought = crate::projection::fixtures::seq_thought(text, 2, 7);
            assert_eq!(thought_box(&thought), formatted("💭 Thought 2/7", text));
            thought.is_revision = Some(true);
            thought.revises_thought = Some(1);
            let header = "🔄 Revision 2/7 (revising thought 1)";
            assert_eq!(thought_box(&thought), formatted(header, text));
        }
    }

    #[test]
    fn open_items_split_lines_and_semicolons() {
        assert_eq!(open_items("None"), Vec::<String>::new());
        assert_eq!(open_items("- a\n2. b\n\n* c"), vec!["a", "b", "c"]);
        assert_eq!(open_items("a; b"), vec!["a", "b"]);
    }
}
