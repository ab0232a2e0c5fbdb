//! The branch tools of `specs/ledger.md`, on planning approaches and
//! `sequentialthinking` branches alike: `evaluate_branch` (a weighted score, recorded
//! with its weights), `compare_branches` (a ranking with its reasons, read-only),
//! `close_branch` (a conclusion; the branch takes no more thoughts) and `merge_branch`
//! (the branch's finding brought back into the main line as a thought citing it).
//!
//! Owns: the score fields' parsing and schema, the weights, the ranking methods. Must
//! not: record into a session of another kind than thinking or planning.

use super::payload::{Body, PlanningEvent};
use super::{RECOMMENDATIONS, blocking, valid_next};
use crate::event::{NewEvent, Payload, SessionKind};
use crate::projection::tree::ThoughtTree;
use crate::request::ToolCall;
use crate::store::{Ledger, SessionHead};
use crate::tools::args::{Args, MAX_ID_BYTES, describe, finish};
use crate::tools::planning::state::{
    BranchClose, BranchMerge, Criterion, Evaluation, Folded, Planning, PlanningSummary, round2,
    weighted_score,
};
use crate::tools::write::Target;
use crate::tools::{
    ToolError, reading_annotations, structured_result, tool_definition, writing_annotations,
};
use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value, json};

pub(crate) const EVALUATE_BRANCH: &str = "evaluate_branch";
pub(crate) const COMPARE_BRANCHES: &str = "compare_branches";
pub(crate) const CLOSE_BRANCH: &str = "close_branch";
pub(crate) const MERGE_BRANCH: &str = "merge_branch";

/// A criterion's name, weight, and whether lower is better.
pub(crate) type Weight = (&'static str, f64, bool);

/// deep_planning's weights (`specs/planning.md`).
pub(crate) const PLAN_WEIGHTS: &[Weight] = &[
    ("feasibility", 0.3, false),
    ("completeness", 0.25, false),
    ("coherence", 0.25, false),
    ("risk", 0.2, true),
];

/// evaluate_branch's weights (`specs/ledger.md`).
pub(crate) const BRANCH_WEIGHTS: &[Weight] = &[
    ("feasibility", 0.25, false),
    ("completeness", 0.20, false),
    ("coherence", 0.20, false),
    ("novelty", 0.15, false),
    ("convergence", 0.10, false),
    ("risk", 0.10, true),
];

/// The ranking methods of compare_branches.
pub(crate) const METHODS: [&str; 4] =
    ["max_score", "weighted_voting", "risk_adjusted", "consensus"];

/// A score's schema: a number or a numeric string. Its bounds (0–10) are said once in
/// the tool's description, not as `minimum`/`maximum` on every score field (25 bytes
/// each, ten fields in `--toolsets all`); [`criteria`] refuses a score outside them,
/// naming the bounds.
pub(crate) fn score_schema() -> Value {
    json!({"type": ["number", "string"]})
}

/// A criterion's score when the call does not give it (deep_planning's rule; an
/// `evaluate_branch` answer names the criteria it filled so).
pub(crate) const DEFAULT_SCORE: f64 = 5.0;

/// The criteria of `weights`, each 0–10 (default [`DEFAULT_SCORE`]): a number or a
/// numeric string. A criterion whose name was misspelt (`feasability`) is a problem
/// naming both, never defaulted.
pub(crate) fn criteria(
    args: &mut Args<'_>,
    raw: &Map<String, Value>,
    weights: &[Weight],
    tool: &str,
) -> Vec<Criterion> {
    let known = super::fields_of(tool);
    let mut out = Vec::with_capacity(weights.len());
    for &(name, weight, inverted) in weights {
        crate::tools::args::note_read(&[name]);
        let score = match raw.get(name) {
            None => {
                if let Some(given) = args.misspelt(&[name], known) {
                    let given = given.to_string();
                    args.problem(
                        name,
                        format!(
                            "missing: `{given}` was given, did you mean `{name}`? (a score is never defaulted for a misspelt name)"
                        ),
                    );
                    continue;
                }
                Some(DEFAULT_SCORE)
            }
            Some(Value::Number(n)) => n.as_f64(),
            Some(Value::String(s)) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
            Some(_) => None,
        };
        match score {
            Some(score) if (0.0..=10.0).contains(&score) => out.push(Criterion {
                name: name.to_string(),
                score,
                weight,
                inverted,
            }),
            Some(score) => args.problem(
                name,
                format!("expected a score from 0 to 10, received {score}"),
            ),
            None => args.problem(
                name,
                format!(
                    "expected a score from 0 to 10 (a number or a numeric string), received {}",
                    describe(raw.get(name).unwrap_or(&Value::Null))
                ),
            ),
        }
    }
    out
}

/// `recommendation`: pursue, refine or abandon.
pub(crate) fn recommendation(
    args: &mut Args<'_>,
    _tool: &str,
) -> Result<Option<&'static str>, ToolError> {
    let Some(text) = args.string_limited(&["recommendation"], false, MAX_ID_BYTES) else {
        return Ok(None);
    };
    match RECOMMENDATIONS.iter().find(|r| **r == text.trim()) {
        Some(r) => Ok(Some(r)),
        None => {
            args.problem(
                "recommendation",
                format!(
                    "Invalid recommendation {}: use pursue, refine or abandon",
                    describe(&Value::String(text))
                ),
            );
            Ok(None)
        }
    }
}

/// The branch tools, as listed.
pub(crate) fn tools() -> Vec<Tool> {
    let text = json!({"type": "string"});
    let score = score_schema();
    vec![
        tool_definition(
            EVALUATE_BRANCH,
            None,
            // The scores' bounds are said here once (see `score_schema`).
            "Score a sequentialthinking branch or a plan's approach, each criterion 0-10 (risk: higher is worse); records the weighted total.",
            json!({"type": "object", "properties": {
                "sessionId": text,
                "branchId": text,
                "feasibility": score,
                "completeness": score,
                "coherence": score,
                "novelty": score,
                "convergence": score,
                "risk": score,
                "rationale": text,
                "recommendation": {"type": "string", "enum": RECOMMENDATIONS}
            }, "required": ["sessionId", "branchId"]}),
            None,
            writing_annotations(),
        ),
        tool_definition(
            COMPARE_BRANCHES,
            None,
            "Rank a session's evaluated branches, with reasons.",
            json!({"type": "object", "properties": {
                "sessionId": text,
                "method": {"type": "string", "enum": METHODS}
            }, "required": ["sessionId"]}),
            None,
            reading_annotations(),
        ),
        tool_definition(
            CLOSE_BRANCH,
            None,
            "End a branch with a conclusion; no more thoughts on it.",
            json!({"type": "object", "properties": {
                "sessionId": text,
                "branchId": text,
                "conclusion": text
            }, "required": ["sessionId", "branchId", "conclusion"]}),
            None,
            writing_annotations(),
        ),
        tool_definition(
            MERGE_BRANCH,
            None,
            "A main-line thought citing a branch: its conclusion (summary) or thoughts (append).",
            json!({"type": "object", "properties": {
                "sessionId": text,
                "branchId": text,
                "strategy": {"type": "string", "enum": ["summary", "append"]}
            }, "required": ["sessionId", "branchId"]}),
            None,
            writing_annotations(),
        ),
    ]
}

/// Runs one branch tool call.
pub(crate) async fn call(call: ToolCall) -> Result<CallToolResult, ToolError> {
    match call.name.as_str() {
        EVALUATE_BRANCH => evaluate(call).await,
        COMPARE_BRANCHES => {
            let ledger = call.ctx.ledger.clone();
            let raw = call.arguments.clone();
            drop(call);
            blocking(move || compare(&ledger, &raw)).await
        }
        CLOSE_BRANCH => close(call).await,
        MERGE_BRANCH => merge(call).await,
        other => unreachable!("planning::call dispatched {other}"),
    }
}

fn problem(tool: &str, field: &str, message: String) -> ToolError {
    ToolError::validation(tool, vec![format!("{field}: {message}")])
}

/// The stored session `id` names: a thinking or planning session.
fn session_head(ledger: &Ledger, tool: &str, id: &str) -> Result<SessionHead, ToolError> {
    let head = match ledger.resolve(id)? {
        Some(session) => ledger.head(session)?,
        None => None,
    };
    let Some(head) = head else {
        return Err(problem(
            tool,
            "sessionId",
            format!(
                "session \"{}\" not found; call list_sessions or list_plans to find one",
                short(id)
            ),
        ));
    };
    let kind = head.summary.kind;
    if kind != SessionKind::THINKING && kind != SessionKind::PLANNING {
        return Err(problem(
            tool,
            "sessionId",
            format!(
                "session {} is a {} session; {tool} works on thinking and planning sessions",
                head.session,
                kind.as_str()
            ),
        ));
    }
    Ok(head)
}

/// Most characters of a branch id quoted in an answer.
const QUOTED_ID_MAX_CHARS: usize = 40;

fn short(text: &str) -> String {
    crate::export::truncate(text, QUOTED_ID_MAX_CHARS, crate::export::Ellipsis::After)
}

/// The branch must be one of the session's (as of the head read in the transaction).
fn check_branch(tool: &str, head: Option<&SessionHead>, branch: &str) -> Result<(), ToolError> {
    let known = head.is_some_and(|h| h.summary.branches.iter().any(|b| b == branch));
    if known {
        return Ok(());
    }
    let branches = head
        .map(|h| h.summary.branches.join(", "))
        .unwrap_or_default();
    Err(problem(
        tool,
        "branchId",
        format!(
            "no branch \"{}\" in this session (branches: {})",
            short(branch),
            if branches.is_empty() {
                "none"
            } else {
                &branches
            }
        ),
    ))
}

fn target(head: &SessionHead, id: String) -> Target {
    Target {
        kind: head.summary.kind,
        field: "sessionId",
        named: Some(id),
        continue_key: None,
        remember_key: String::new(),
        idempotency_key: None,
    }
}

/// Reads the common arguments: the session (checked) and the branch id.
async fn session_and_branch(
    call: &ToolCall,
    args: &mut Args<'_>,
) -> Result<(Option<(String, SessionHead)>, Option<String>), ToolError> {
    let id = args.string_limited(&["sessionId", "session_id"], true, MAX_ID_BYTES);
    let branch = args
        .string_limited(&["branchId", "branch_id"], true, MAX_ID_BYTES)
        .filter(|b| !b.trim().is_empty());
    let Some(id) = id else {
        return Ok((None, branch));
    };
    let ledger = call.ctx.ledger.clone();
    let tool = call.name.clone();
    let given = id.clone();
    let head = blocking(move || session_head(&ledger, &tool, &given)).await?;
    Ok((Some((id, head)), branch))
}

async fn evaluate(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    let raw = call.arguments.clone();
    let mut args = Args::new(&raw);
    let (session, branch) = session_and_branch(&call, &mut args).await?;
    if branch.is_none() && !args.has_problems() {
        args.problem("branchId", "expected a non-empty branch id");
    }
    let criteria = criteria(&mut args, &raw, BRANCH_WEIGHTS, EVALUATE_BRANCH);
    let defaulted: Vec<&str> = BRANCH_WEIGHTS
        .iter()
        .map(|(name, _, _)| *name)
        .filter(|name| !raw.contains_key(*name))
        .collect();
    if defaulted.len() == BRANCH_WEIGHTS.len() && !args.has_problems() {
        args.problem(
            "feasibility",
            format!(
                "expected at least one score (0 to 10) of {}; a branch is not scored by defaults alone",
                BRANCH_WEIGHTS
                    .iter()
                    .map(|(name, _, _)| *name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    let rationale = args.string(&["rationale"], false);
    let recommendation = recommendation(&mut args, EVALUATE_BRANCH)?;
    finish(EVALUATE_BRANCH, args)?;
    let ((id, head), branch) = (session.expect("checked"), branch.expect("checked"));
    let evaluation = Evaluation {
        branch_id: branch.clone(),
        score: weighted_score(&criteria),
        criteria,
        rationale: rationale.filter(|r| !r.trim().is_empty()),
        recommendation: recommendation.map(str::to_string),
    };
    let answer_evaluation = evaluation.clone();
    let tool = call.name.clone();
    // Whether the branch had an evaluation already (read in the transaction).
    let replaces = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let replacing = replaces.clone();
    let recorded = call
        .try_record(target(&head, id), move |head, record| {
            check_branch(&tool, head, &branch)?;
            let summary = &head.expect("named").summary;
            let planned = PlanningSummary::of(summary);
            if planned.evaluated.contains(&branch) {
                replacing.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            if let Some(phase) = planned.phase.as_deref() {
                // A plan's approach: deep_planning's rules (the phase machine, one
                // evaluation per approach).
                if !valid_next(Some(phase)).contains(&"evaluate") {
                    return Err(problem(
                        &tool,
                        "sessionId",
                        format!(
                            "Cannot transition from \"{phase}\" to \"evaluate\"; valid next phases: {}",
                            valid_next(Some(phase)).join(", ")
                        ),
                    ));
                }
                if planned.evaluated.contains(&branch) {
                    return Err(problem(
                        &tool,
                        "branchId",
                        format!("An evaluation of \"{}\" already exists (one per approach)", short(&branch)),
                    ));
                }
            }
            Ok(vec![NewEvent::new(Payload::from(PlanningEvent {
                body: Body::BranchEvaluated(evaluation),
                call: record,
            }))])
        })
        .await?;
    let e = answer_evaluation;
    let mut answer = json!({
        "sessionId": super::plan_id(recorded.session, &recorded.head.summary),
        "branchId": e.branch_id,
        "score": e.score,
        "scoreText": format!("{:.2}", e.score),
        "criteria": e.criteria,
        "recommendation": e.recommendation,
        "eventSeq": recorded.seq,
    });
    if !defaulted.is_empty() {
        answer["defaulted"] = json!(defaulted);
        answer["message"] = json!(format!(
            "Not given, scored {DEFAULT_SCORE}: {}.",
            defaulted.join(", ")
        ));
    }
    if replaces.load(std::sync::atomic::Ordering::SeqCst) {
        // The evaluation this one replaces: the branch's last one before it.
        let ledger = call.ctx.ledger.clone();
        let head = recorded.head.clone();
        let (at, branch) = (recorded.seq - 1, e.branch_id.clone());
        let previous = blocking(move || {
            let tree = crate::query::load_tree(&ledger, &head, Some(at))?;
            Ok(Planning::of(&tree).evaluation(&branch).cloned())
        })
        .await?;
        if let Some(previous) = previous {
            let replaced = format!(
                "Replaces the evaluation of \"{}\" recorded at event {} (score {:.2}); compare_branches ranks by this one.",
                short(&e.branch_id),
                previous.seq,
                previous.item.score
            );
            answer["replaces"] = json!({
                "eventSeq": previous.seq,
                "score": previous.item.score,
                "scoreText": format!("{:.2}", previous.item.score),
            });
            answer["message"] = json!(match answer["message"].as_str() {
                Some(earlier) => format!("{earlier} {replaced}"),
                None => replaced,
            });
        }
    }
    Ok(structured_result(answer))
}

/// One branch's place in a ranking.
struct Ranked<'a> {
    branch: &'a str,
    evaluation: &'a Folded<Evaluation>,
    value: f64,
    reason: String,
}

/// The criterion's contribution as counted (risk inverted).
fn counted(c: &Criterion) -> f64 {
    if c.inverted { 10.0 - c.score } else { c.score }
}

/// Ranks the evaluated branches of `tree` by `method`, best first.
fn rank<'a>(tree: &'a ThoughtTree, branches: &'a [String], method: &str) -> Vec<Ranked<'a>> {
    let evaluated: Vec<(&str, &Folded<Evaluation>)> = branches
        .iter()
        .filter_map(|b| Planning::of(tree).evaluation(b).map(|e| (b.as_str(), e)))
        .collect();
    let mut ranked: Vec<Ranked<'a>> = match method {
        "weighted_voting" => {
            // Each criterion votes, with its weight, for the branches best on it.
            let mut votes: Vec<(f64, Vec<String>)> = vec![(0.0, Vec::new()); evaluated.len()];
            let names: Vec<&str> = evaluated
                .first()
                .map(|(_, e)| e.item.criteria.iter().map(|c| c.name.as_str()).collect())
                .unwrap_or_default();
            for name in names {
                let values: Vec<Option<(f64, f64)>> = evaluated
                    .iter()
                    .map(|(_, e)| {
                        e.item
                            .criteria
                            .iter()
                            .find(|c| c.name == name)
                            .map(|c| (counted(c), c.weight))
                    })
                    .collect();
                let best = values.iter().flatten().map(|(v, _)| *v).fold(f64::MIN, f64::max);
                for (i, value) in values.iter().enumerate() {
                    if let Some((v, w)) = value
                        && *v == best
                    {
                        votes[i].0 += w;
                        votes[i].1.push(name.to_string());
                    }
                }
            }
            evaluated
                .iter()
                .zip(votes)
                .map(|((branch, e), (value, won))| Ranked {
                    branch,
                    evaluation: e,
                    value: round2(value),
                    reason: if won.is_empty() {
                        "best on no criterion".to_string()
                    } else {
                        format!("best on {} (votes weighted {:.2})", won.join(", "), value)
                    },
                })
                .collect()
        }
        "risk_adjusted" => evaluated
            .iter()
            .map(|(branch, e)| {
                let risk = e.item.criterion("risk").unwrap_or(5.0);
                let value = round2(e.item.score * (1.0 - risk / 20.0));
                Ranked {
                    branch,
                    evaluation: e,
                    value,
                    reason: format!(
                        "score {:.2} less {}% for risk {}",
                        e.item.score,
                        crate::tools::planning::document::number(risk * 5.0),
                        crate::tools::planning::document::number(risk)
                    ),
                }
            })
            .collect(),
        "consensus" => evaluated
            .iter()
            .map(|(branch, e)| {
                let weakest = e
                    .item
                    .criteria
                    .iter()
                    .min_by(|a, b| counted(a).total_cmp(&counted(b)));
                let value = weakest.map_or(0.0, counted);
                Ranked {
                    branch,
                    evaluation: e,
                    value,
                    reason: match weakest {
                        Some(c) => format!(
                            "weakest criterion {} at {}/10 (every criterion agrees at least this far)",
                            c.name,
                            crate::tools::planning::document::number(counted(c))
                        ),
                        None => "no criteria".to_string(),
                    },
                }
            })
            .collect(),
        _ => evaluated
            .iter()
            .map(|(branch, e)| Ranked {
                branch,
                evaluation: e,
                value: e.item.score,
                reason: format!("weighted score {:.2}/10", e.item.score),
            })
            .collect(),
    };
    // Best value first; ties by the weighted score, then the branch's first-seen order.
    ranked.sort_by(|a, b| {
        b.value
            .total_cmp(&a.value)
            .then(b.evaluation.item.score.total_cmp(&a.evaluation.item.score))
    });
    ranked
}

fn compare(ledger: &Ledger, raw: &Map<String, Value>) -> Result<CallToolResult, ToolError> {
    let mut args = Args::new(raw);
    let id = args.string_limited(&["sessionId", "session_id"], true, MAX_ID_BYTES);
    let method = args.string_limited(&["method"], false, MAX_ID_BYTES);
    let method = match method.as_deref().map(str::trim) {
        None => "max_score",
        Some(m) => match METHODS.iter().find(|known| **known == m) {
            Some(known) => known,
            None => {
                args.problem(
                    "method",
                    format!(
                        "unknown method {}; use {}",
                        describe(&Value::String(m.into())),
                        METHODS.join(", ")
                    ),
                );
                "max_score"
            }
        },
    };
    finish(COMPARE_BRANCHES, args)?;
    let head = session_head(ledger, COMPARE_BRANCHES, &id.expect("required"))?;
    let tree = crate::tools::ledger::load_tree(ledger, &head, None)?;
    let branches = &head.summary.branches;
    let ranked = rank(&tree, branches, method);
    let rows: Vec<Value> = ranked
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut row = json!({
                "rank": i + 1,
                "branchId": r.branch,
                "score": r.evaluation.item.score,
                "value": r.value,
                "reason": r.reason,
            });
            if let Some(a) = Planning::of(&tree).approach(r.branch) {
                row["name"] = json!(a.name);
            }
            if let Some(rec) = &r.evaluation.item.recommendation {
                row["recommendation"] = json!(rec);
            }
            if Planning::of(&tree).conclusion(r.branch).is_some() {
                row["closed"] = json!(true);
            }
            row
        })
        .collect();
    let not_evaluated: Vec<&String> = branches
        .iter()
        .filter(|b| Planning::of(&tree).evaluation(b).is_none())
        .collect();
    let explanation = match ranked.first() {
        None => {
            "No branch of this session is evaluated yet: call evaluate_branch first.".to_string()
        }
        Some(best) => format!(
            "By {method}, \"{}\" ranks first: {}.{}",
            best.branch,
            best.reason,
            match ranked.get(1) {
                Some(next) => format!(" Next: \"{}\" ({}).", next.branch, next.reason),
                None => String::new(),
            }
        ),
    };
    Ok(structured_result(json!({
        "sessionId": super::plan_id(head.session, &head.summary),
        "method": method,
        "ranking": rows,
        "notEvaluated": not_evaluated,
        "explanation": explanation,
    })))
}

async fn close(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    let raw = call.arguments.clone();
    let mut args = Args::new(&raw);
    let (session, branch) = session_and_branch(&call, &mut args).await?;
    let conclusion = args
        .string(&["conclusion"], true)
        .filter(|c| !c.trim().is_empty());
    if conclusion.is_none() && !args.has_problems() {
        args.problem("conclusion", "expected a non-empty conclusion");
    }
    if branch.is_none() && !args.has_problems() {
        args.problem("branchId", "expected a non-empty branch id");
    }
    finish(CLOSE_BRANCH, args)?;
    let ((id, head), branch) = (session.expect("checked"), branch.expect("checked"));
    let conclusion = conclusion.expect("checked");
    let tool = call.name.clone();
    let closed = branch.clone();
    let recorded = call
        .try_record(target(&head, id), move |head, record| {
            check_branch(&tool, head, &branch)?;
            if head.is_some_and(|h| h.summary.branch_closed(&branch)) {
                return Err(problem(
                    &tool,
                    "branchId",
                    format!("branch \"{}\" is already closed", short(&branch)),
                ));
            }
            Ok(vec![NewEvent::new(Payload::from(PlanningEvent {
                body: Body::BranchClosed(BranchClose {
                    branch_id: branch,
                    conclusion,
                }),
                call: record,
            }))])
        })
        .await?;
    Ok(structured_result(json!({
        "sessionId": super::plan_id(recorded.session, &recorded.head.summary),
        "branchId": closed,
        "closed": true,
        "closedBranches": PlanningSummary::of(&recorded.head.summary).closed_branches,
        "eventSeq": recorded.seq,
    })))
}

/// The merged thought's text: `Merged branch <id>: <finding>`.
fn merged_text(tree: &ThoughtTree, branch: &str, strategy: &str) -> String {
    let thoughts: Vec<&str> = tree
        .thoughts()
        .filter(|t| t.branch_id.as_deref() == Some(branch))
        .map(|t| t.thought.as_str())
        .collect();
    let approach = Planning::of(tree).approach(branch);
    let finding = Planning::of(tree)
        .conclusion(branch)
        .map(str::to_string)
        .or_else(|| thoughts.last().map(|t| t.to_string()))
        .or_else(|| {
            approach.map(|a| match &a.description {
                Some(d) => format!("{}: {d}", a.name),
                None => a.name.clone(),
            })
        })
        .unwrap_or_default();
    let mut text = format!("Merged branch {branch}: {finding}");
    if strategy == "append" {
        for thought in thoughts {
            text.push_str("\n- ");
            text.push_str(thought);
        }
    }
    text
}

async fn merge(mut call: ToolCall) -> Result<CallToolResult, ToolError> {
    let raw = call.arguments.clone();
    let mut args = Args::new(&raw);
    let (session, branch) = session_and_branch(&call, &mut args).await?;
    let strategy = args.string_limited(&["strategy"], false, MAX_ID_BYTES);
    let strategy = match strategy.as_deref().map(str::trim) {
        None | Some("summary") => "summary",
        Some("append") => "append",
        Some(other) => {
            args.problem(
                "strategy",
                format!(
                    "unknown strategy {}; use summary or append",
                    describe(&Value::String(other.into()))
                ),
            );
            "summary"
        }
    };
    if branch.is_none() && !args.has_problems() {
        args.problem("branchId", "expected a non-empty branch id");
    }
    finish(MERGE_BRANCH, args)?;
    let ((id, head), branch) = (session.expect("checked"), branch.expect("checked"));
    check_branch(MERGE_BRANCH, Some(&head), &branch)?;
    let tree = {
        let ledger = call.ctx.ledger.clone();
        let head = head.clone();
        blocking(move || Ok(crate::tools::ledger::load_tree(&ledger, &head, None)?)).await?
    };
    let thought = merged_text(&tree, &branch, strategy);
    let thought_number = tree
        .thoughts()
        .filter(|t| t.branch_id.is_none())
        .map(|t| t.thought_number)
        .max()
        .unwrap_or(0)
        + 1;
    let merge = BranchMerge {
        branch_id: branch.clone(),
        strategy: strategy.to_string(),
        thought_number,
        thought,
    };
    let answer = merge.clone();
    let tool = call.name.clone();
    let recorded = call
        .try_record(target(&head, id), move |head, record| {
            check_branch(&tool, head, &branch)?;
            Ok(vec![NewEvent::new(Payload::from(PlanningEvent {
                body: Body::BranchMerged(merge),
                call: record,
            }))])
        })
        .await?;
    Ok(structured_result(json!({
        "sessionId": super::plan_id(recorded.session, &recorded.head.summary),
        "branchId": answer.branch_id,
        "strategy": answer.strategy,
        "thoughtNumber": answer.thought_number,
        "thought": answer.thought,
        "eventSeq": recorded.seq,
    })))
}
