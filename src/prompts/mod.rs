//! Prompts: how a person (not the model) reaches the ledger, as slash commands
//! (`/mcp__<server>__continue` in Claude Code) or a client's prompt picker.
//!
//! Owns: the three prompts every server has (`continue`, `recall`, `review`), their
//! arguments and descriptions ([`list`]), building their messages ([`get`]): our own
//! instructions first, then the stored text as a quoted, bounded data block with its
//! provenance ([`render`]); and [`FamilyPrompt`], a prompt a family offers (the planning
//! family's `plan`, in its folder), listed after these where its tool is on and built with
//! the helpers shared here. Completions of their session arguments live in [`complete`]; every
//! ledger read goes through [`reads`]. What a family adds (a plan's state, a booster's
//! steps, agent nodes, the call that resumes them, merged branches, review extras) comes
//! from the prompt hooks ([`crate::export::family::FamilyRender`]) of the renderers the
//! ledger's families carry ([`reads::exports`]), in registry order; this module names no
//! family's state. Must not: call a model, write anything, or put stored text outside a
//! data block (a stored thought can try to steer today's model).

pub(crate) mod complete;
pub(crate) mod reads;
pub(crate) mod render;

use crate::event::format_time;
use crate::export::family::{self, Exports, PromptResume};
use crate::projection::tree::ThoughtTree;
use crate::store::{Ledger, SessionHead, StoreError};
use render::{DATA_NOTICE, data_block, fit, markdown_block};
use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role};
use serde_json::{Map, Value, json};

pub(crate) const CONTINUE: &str = "continue";
pub(crate) const RECALL: &str = "recall";
pub(crate) const REVIEW: &str = "review";

/// The argument naming a session (`continue`, `review`).
pub(crate) const SESSION_ARGUMENT: &str = "sessionId";
/// `recall`'s argument.
pub(crate) const TOPIC_ARGUMENT: &str = "topic";

/// Thoughts (or booster steps, agent nodes) `continue` quotes, the latest ones.
pub(crate) const CONTINUE_LAST_ITEMS: usize = 6;
/// Matches `recall` quotes.
pub(crate) const RECALL_MATCHES: usize = 12;
/// Longest topic or problem accepted (bytes).
pub(crate) const MAX_ARGUMENT_BYTES: usize = 4096;

/// A prompt a family offers: listed after the core prompts, in registry order, only where
/// its tool is on; built from the ledger with this module's helpers ([`text_argument`],
/// [`session_facts`], [`messages`], [`reads`]).
pub(crate) trait FamilyPrompt: Sync {
    /// Its name (`prompts/get`'s `name`).
    fn name(&self) -> &'static str;
    /// The tool it drives: the prompt is listed, and built, only where that tool is on.
    fn tool(&self) -> &'static str;
    /// The toolset of that tool (named when the prompt is asked for where it is off).
    fn toolset(&self) -> &'static str;
    /// Its listing: description and arguments.
    fn listing(&self) -> Prompt;
    /// Its messages for `arguments` (blocking reads).
    fn get(
        &self,
        ledger: &Ledger,
        arguments: &Map<String, Value>,
    ) -> Result<GetPromptResult, PromptError>;
}

/// The registered families' prompts, in registry order.
fn family_prompts() -> impl Iterator<Item = &'static dyn FamilyPrompt> {
    crate::tools::FAMILIES
        .iter()
        .flat_map(|family| family.prompts.iter().copied())
}

/// Every prompt's name, for messages: "continue, recall, review and plan".
fn prompt_names() -> String {
    let mut names = vec![CONTINUE, RECALL, REVIEW];
    names.extend(family_prompts().map(|p| p.name()));
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// Why a prompt could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PromptError {
    #[error("no prompt {0:?}: the prompts are {names}", names = prompt_names())]
    Unknown(String),
    #[error(
        "prompt {prompt} needs the argument {argument}{hint}",
        hint = argument_hint(argument)
    )]
    MissingArgument {
        prompt: &'static str,
        argument: &'static str,
    },
    #[error("argument {argument} is longer than {MAX_ARGUMENT_BYTES} bytes")]
    TooLong { argument: &'static str },
    #[error(
        "no session {0:?} in the ledger: complete the argument (sessions by id or title) or call list_sessions"
    )]
    NoSession(String),
    #[error(
        "the {prompt} prompt needs the {toolset} toolset: serve --toolsets with {toolset} in the list"
    )]
    ToolsetOff {
        prompt: &'static str,
        toolset: &'static str,
    },
    /// A topic the search cannot run (says how to write one).
    #[error("topic: {0}")]
    Topic(crate::recall::QueryError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The search index failed (not the caller's mistake).
    #[error(transparent)]
    Search(crate::recall::RecallError),
}

fn argument_hint(argument: &str) -> &'static str {
    if argument == SESSION_ARGUMENT {
        " (a session id or alias; completions list them by id and title)"
    } else {
        ""
    }
}

/// The prompts this server offers: a family's only where its tool is on.
pub(crate) fn list(tool_on: &dyn Fn(&str) -> bool) -> Vec<Prompt> {
    let session = || {
        PromptArgument::new(SESSION_ARGUMENT)
            .with_title("Session")
            .with_description("The session's id or alias (complete it by id or title words)")
            .with_required(true)
    };
    let mut prompts = vec![
        Prompt::new(
            CONTINUE,
            Some("Continue a stored session where it left off: its title, last thoughts, open branches, plan phase or booster state, and the next call to make"),
            Some(vec![session()]),
        )
        .with_title("Continue a session"),
        Prompt::new(
            RECALL,
            Some("What did we find or decide about a topic? The past sessions and thoughts most relevant to it, ranked as search_history ranks, with their ids, as a brief"),
            Some(vec![
                PromptArgument::new(TOPIC_ARGUMENT)
                    .with_title("Topic")
                    .with_description("Words or a phrase to look for in every session")
                    .with_required(true),
            ]),
        )
        .with_title("Recall past work"),
        Prompt::new(
            REVIEW,
            Some("Critique a stored session: its Markdown export and evaluations, with instructions to check it"),
            Some(vec![session()]),
        )
        .with_title("Review a session"),
    ];
    prompts.extend(
        family_prompts()
            .filter(|p| tool_on(p.tool()))
            .map(|p| p.listing()),
    );
    prompts
}

/// Builds prompt `name` with `arguments` (blocking reads).
pub(crate) fn get(
    ledger: &Ledger,
    tool_on: &dyn Fn(&str) -> bool,
    name: &str,
    arguments: &Map<String, Value>,
) -> Result<GetPromptResult, PromptError> {
    match name {
        CONTINUE => {
            let head = session_argument(ledger, CONTINUE, arguments)?;
            continue_prompt(ledger, tool_on, &head)
        }
        RECALL => {
            let topic = text_argument(RECALL, TOPIC_ARGUMENT, arguments)?;
            recall_prompt(ledger, &topic)
        }
        REVIEW => {
            let head = session_argument(ledger, REVIEW, arguments)?;
            review_prompt(ledger, &head)
        }
        other => match family_prompts().find(|p| p.name() == other) {
            Some(prompt) if tool_on(prompt.tool()) => prompt.get(ledger, arguments),
            Some(prompt) => Err(PromptError::ToolsetOff {
                prompt: prompt.name(),
                toolset: prompt.toolset(),
            }),
            None => Err(PromptError::Unknown(other.to_string())),
        },
    }
}

/// A required string argument, trimmed, not empty, bounded. Clients send strings; a
/// number or boolean is taken as its text.
pub(crate) fn text_argument(
    prompt: &'static str,
    argument: &'static str,
    arguments: &Map<String, Value>,
) -> Result<String, PromptError> {
    let text = match arguments.get(argument) {
        Some(Value::String(text)) => text.trim().to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        _ => String::new(),
    };
    if text.is_empty() {
        return Err(PromptError::MissingArgument { prompt, argument });
    }
    if text.len() > MAX_ARGUMENT_BYTES {
        return Err(PromptError::TooLong { argument });
    }
    Ok(text)
}

fn session_argument(
    ledger: &Ledger,
    prompt: &'static str,
    arguments: &Map<String, Value>,
) -> Result<SessionHead, PromptError> {
    let argument = text_argument(prompt, SESSION_ARGUMENT, arguments)?;
    // A completion's value carries the title beside the id.
    let id = complete::session_id_of(&argument).to_string();
    if id.len() > crate::tools::args::MAX_ID_BYTES {
        return Err(PromptError::TooLong {
            argument: SESSION_ARGUMENT,
        });
    }
    reads::session(ledger, &id)?.ok_or(PromptError::NoSession(id))
}

/// The id a tool takes back for this session: its alias when it has one (a plan's `dp-`
/// id), else its id.
pub(crate) fn resumable_id(head: &SessionHead) -> String {
    family::resumable_id(&head.summary, &head.session.to_string())
}

/// The session's own facts, for every prompt about one session: by the id its tools give
/// (as `list_sessions` lists it), its ledger id beside when that differs.
pub(crate) fn session_facts(head: &SessionHead) -> Value {
    let s = &head.summary;
    let ledger_id = head.session.to_string();
    let id = resumable_id(head);
    let mut facts = json!({
        "sessionId": id,
        "kind": s.kind.as_str(),
        "title": s.title,
        "status": s.status(),
        "events": head.seq,
        "thoughts": s.thoughts,
        "createdAt": format_time(s.created_at),
        "updatedAt": format_time(s.updated_at),
    });
    if id != ledger_id {
        facts["ledgerId"] = json!(ledger_id);
    }
    if !s.aliases.is_empty() {
        facts["aliases"] = json!(s.aliases);
    }
    facts
}

fn user(text: String) -> PromptMessage {
    PromptMessage::new_text(Role::User, text)
}

/// The messages of a prompt: our instructions, then the quoted data.
pub(crate) fn messages(instructions: String, data: Value) -> Vec<PromptMessage> {
    vec![
        user(instructions),
        user(format!("{DATA_NOTICE}\n\n{}", data_block(&fit(data)))),
    ]
}

// ---------------------------------------------------------------------------------------
// continue

fn continue_prompt(
    ledger: &Ledger,
    tool_on: &dyn Fn(&str) -> bool,
    head: &SessionHead,
) -> Result<GetPromptResult, PromptError> {
    let tree = reads::tree(ledger, head)?;
    let exports = reads::exports(ledger);
    let mut data = json!({"session": session_facts(head)});
    let thoughts: Vec<Value> = last_items(tree.thoughts(), CONTINUE_LAST_ITEMS)
        .into_iter()
        .map(|t| {
            let mut row = json!({
                "seq": t.seq,
                "tool": t.tool,
                "thoughtNumber": t.thought_number,
                "thought": t.thought,
            });
            if let Some(total) = t.total_thoughts {
                row["totalThoughts"] = json!(total);
            }
            if let Some(branch) = &t.branch_id {
                row["branchId"] = json!(branch);
            }
            if let Some(next) = t.next_thought_needed {
                row["nextThoughtNeeded"] = json!(next);
            }
            row
        })
        .collect();
    if !thoughts.is_empty() {
        data["lastThoughts"] = json!(thoughts);
    }
    let open = open_branches(head, &tree, &exports);
    if !open.is_empty() {
        data["openBranches"] = json!(open);
    }
    for render in exports.renders() {
        if let Some((key, state)) = render.prompt_state(&tree, CONTINUE_LAST_ITEMS) {
            data[key] = state;
        }
    }
    let resume = resume_call(head, &tree, &exports, tool_on);
    data["resume"] = resume;
    // By the id its tool gives and takes (a plan's `dp-` id), as the lists show it.
    let id = resumable_id(head);
    let instructions = format!(
        "Continue the reasoning-ledger session {id} where it left off.\n\n\
         1. Read where it stands in the data below: `session` (title, status), `lastThoughts`, \
         `openBranches`, and `plan`, `booster` or `agentNodes` when present.\n\
         2. In two or three sentences, say where the reasoning stands and what is still open.\n\
         3. Take the next step: call the tool named in `resume.tool` with the arguments in \
         `resume.arguments` (fill in the ones `resume.fill` names), building on the last \
         thoughts instead of repeating them. If `resume.available` is false, say which \
         toolset the server needs instead.\n\n\
         For the whole session, read the resource ledger://sessions/{id}/markdown."
    );
    Ok(GetPromptResult::new(messages(instructions, data))
        .with_description(format!("Continue session {id}")))
}

/// The last `n` items of `items`, in order.
fn last_items<T>(items: impl Iterator<Item = T>, n: usize) -> Vec<T> {
    let mut all: Vec<T> = items.collect();
    let skip = all.len().saturating_sub(n);
    all.drain(..skip);
    all
}

/// Branches still taking thoughts: not closed, not merged (as a renderer of `exports`
/// says).
fn open_branches(head: &SessionHead, tree: &ThoughtTree, exports: &Exports) -> Vec<Value> {
    tree.branches
        .iter()
        .filter(|b| !head.summary.branch_closed(&b.id))
        .filter(|b| {
            !exports
                .renders()
                .iter()
                .any(|r| r.prompt_branch_merged(tree, &b.id))
        })
        .map(|b| json!({"branchId": b.id, "fromThought": b.from_thought, "thoughts": b.thoughts, "firstSeq": b.first_seq}))
        .collect()
}

/// The call that carries the session on (a renderer of `exports` proposes it when its
/// state decides it): its tool, the arguments we know, the ones the model must fill in,
/// and whether this server offers the tool.
fn resume_call(
    head: &SessionHead,
    tree: &ThoughtTree,
    exports: &Exports,
    tool_on: &dyn Fn(&str) -> bool,
) -> Value {
    let id = resumable_id(head);
    let session = head.session.to_string();
    let family = exports
        .renders()
        .iter()
        .find_map(|r| r.prompt_resume(tree, &head.summary, &session));
    let (tool, arguments, fill, note): (&str, Value, &[&str], Option<String>) =
        if let Some(PromptResume {
            tool,
            arguments,
            fill,
            note,
        }) = family
        {
            (tool, arguments, fill, note)
        } else if let Some(last) = tree.thoughts().last() {
            let tool = last.tool.as_str();
            if tool == "think" {
                ("think", json!({"sessionId": id}), &["thought"], None)
            } else {
                let next = last.thought_number + 1;
                let total = last.total_thoughts.unwrap_or(next).max(next);
                let note = (head.summary.next_thought_needed == Some(false)).then(|| {
                    "the last thought said no more were needed: continue only if something is \
                     open (a revision with isRevision, or a new branch)"
                        .to_string()
                });
                (
                    static_tool(tool),
                    json!({"sessionId": id, "thoughtNumber": next, "totalThoughts": total}),
                    &["thought", "nextThoughtNeeded"],
                    note,
                )
            }
        } else {
            (
                "sequentialthinking",
                json!({"sessionId": id, "thoughtNumber": 1, "totalThoughts": 1}),
                &["thought", "totalThoughts", "nextThoughtNeeded"],
                None,
            )
        };
    let mut resume = json!({
        "tool": tool,
        "arguments": arguments,
        "available": tool_on(tool),
    });
    if !fill.is_empty() {
        resume["fill"] = json!(fill);
    }
    if let Some(note) = note {
        resume["note"] = json!(note);
    }
    resume
}

/// A recorded tool name as one of ours (a stored name is data: it never names a tool we
/// do not know).
fn static_tool(recorded: &str) -> &'static str {
    const KNOWN: [&str; 3] = ["sequentialthinking", "sequentialthinking_qa", "think"];
    KNOWN
        .into_iter()
        .find(|known| *known == recorded)
        .unwrap_or("sequentialthinking")
}

// ---------------------------------------------------------------------------------------
// recall

fn recall_prompt(ledger: &Ledger, topic: &str) -> Result<GetPromptResult, PromptError> {
    let hits = reads::search(ledger, topic, RECALL_MATCHES)?;
    let heads = reads::heads_newest_first(ledger)?;
    let mut sessions: Vec<Value> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for hit in &hits {
        if seen.contains(&hit.session_id.as_str()) {
            continue;
        }
        seen.push(&hit.session_id);
        if let Some(head) = heads
            .iter()
            .find(|h| h.session.to_string() == hit.session_id)
        {
            sessions.push(session_facts(head));
        }
    }
    let matches: Vec<Value> = hits
        .iter()
        .map(|hit| {
            json!({
                "sessionId": hit.session_id,
                "seq": hit.seq,
                "type": hit.event_type,
                "score": hit.score,
                "at": hit.at,
                "snippet": hit.snippet,
            })
        })
        .collect();
    let found = if hits.is_empty() {
        "No stored session mentions the topic: say so, then start fresh."
    } else {
        "Write a brief from them: what was already found or decided about the topic (cite \
         session ids and seqs), what was left open or contradicted, and where to pick up. \
         Read a whole session at ledger://sessions/{id}/markdown or with get_history when a \
         snippet is not enough."
    };
    let instructions = format!(
        "Recall what this ledger holds about the topic given in the data below (`topic`). \
         The data lists the best matches of a search over every session's text, ranked as \
         search_history ranks them (by relevance: matches of every word before matches of \
         some), and the sessions they come from.\n\n{found}"
    );
    let data = json!({
        "topic": topic,
        "sessions": sessions,
        "matches": matches,
    });
    Ok(
        GetPromptResult::new(messages(instructions, data)).with_description(format!(
            "Past work on the topic ({})",
            crate::export::counted(hits.len(), "match", "matches")
        )),
    )
}

// ---------------------------------------------------------------------------------------
// review

fn review_prompt(ledger: &Ledger, head: &SessionHead) -> Result<GetPromptResult, PromptError> {
    let tree = reads::tree(ledger, head)?;
    let exports = reads::exports(ledger);
    let id = resumable_id(head);
    let mut data = json!({"session": session_facts(head)});
    for render in exports.renders() {
        if let Some((key, rows)) = render.prompt_review(&tree) {
            data[key] = rows;
        }
    }
    let markdown = reads::markdown(&tree, &exports);
    let whole = format!("ledger://sessions/{id}/markdown");
    let instructions = format!(
        "Review the reasoning-ledger session {id} critically; do not continue it.\n\n\
         Check, citing seq numbers:\n\
         - does each step follow from the ones before it, and does the conclusion follow from the steps?\n\
         - gaps: cases, alternatives or evidence that were never considered;\n\
         - contradictions between steps, and revisions that did not carry through;\n\
         - unsupported claims and untested assumptions;\n\
         - evaluations and scores (when present): does each score match its rationale, and \
         are the approaches compared on the same criteria?\n\
         - branches left open without a conclusion.\n\n\
         End with the three changes that would most improve it."
    );
    let data_text = format!(
        "{DATA_NOTICE}\n\nThe session's facts and evaluations:\n\n{}\n\nThe session as \
         Markdown (events 1 to {}):\n\n{}",
        data_block(&fit(data)),
        head.seq,
        markdown_block(&markdown, &whole)
    );
    Ok(
        GetPromptResult::new(vec![user(instructions), user(data_text)])
            .with_description(format!("Review session {id}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_listed_only_where_deep_planning_is_on() {
        let names = |on: bool| -> Vec<String> {
            list(&|tool| on && tool == "deep_planning")
                .into_iter()
                .map(|p| p.name)
                .collect()
        };
        assert_eq!(names(false), ["continue", "recall", "review"]);
        assert_eq!(names(true), ["continue", "recall", "review", "plan"]);
        for prompt in list(&|_| true) {
            assert!(prompt.description.is_some_and(|d| !d.is_empty()));
            let arguments = prompt.arguments.expect("typed arguments");
            assert!(arguments.iter().all(|a| a.required == Some(true)));
        }
    }

    #[test]
    fn the_unknown_prompt_and_the_toolset_off_say_what_they_always_said() {
        assert_eq!(
            PromptError::Unknown("x".into()).to_string(),
            "no prompt \"x\": the prompts are continue, recall, review and plan"
        );
        let off = get_off("plan");
        assert_eq!(
            off,
            "the plan prompt needs the planning toolset: serve --toolsets with planning in the list"
        );
    }

    /// The refusal of prompt `name` where no tool is on (no ledger read happens first).
    fn get_off(name: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path(), crate::tools::families()).unwrap();
        get(&ledger, &|_| false, name, &Map::new())
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_recorded_tool_name_never_names_an_unknown_tool() {
        assert_eq!(static_tool("think"), "think");
        assert_eq!(static_tool("rm -rf /"), "sequentialthinking");
    }
}
