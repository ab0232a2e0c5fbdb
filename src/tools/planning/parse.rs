//! `deep_planning`'s arguments: arrays as JSON arrays or JSON-encoded strings, scores
//! 0–10 as numbers or numeric strings, steps normalised, each phase's fields checked
//! ([`PlanArgs::parse`]).
//!
//! Owns: [`PlanArgs`] and the parsing helpers the branch tools share. Must not: read the
//! ledger or decide anything a head is needed for (that is `decide_planning`).

use super::*;

/// A validated `deep_planning` call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlanArgs {
    /// One of [`PHASES`].
    pub phase: &'static str,
    /// The session to resume (not for init).
    pub session_id: Option<String>,
    /// The new session's `dp-` id (init only).
    pub alias: String,
    pub body: Body,
    /// finalize: markdown or json.
    pub format: &'static str,
}

/// A new plan's id: `dp-` and 8 base62 characters.
pub(crate) fn new_plan_id() -> String {
    const DIGITS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut random = ulid::Ulid::generate().random();
    let mut id = String::from("dp-");
    for _ in 0..8 {
        id.push(DIGITS[(random % 62) as usize] as char);
        random /= 62;
    }
    id
}

/// A field that takes an array as JSON, or as a JSON-encoded string.
pub(super) fn json_array(
    args: &mut Args<'_>,
    raw: &Map<String, Value>,
    field: &str,
) -> Option<Vec<Value>> {
    match raw.get(field)? {
        Value::Array(items) => Some(items.clone()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(items)) => Some(items),
            Ok(other) => {
                args.problem(
                    field,
                    format!(
                        "expected an array (or a JSON string of one), received a JSON string holding {}",
                        describe(&other)
                    ),
                );
                None
            }
            Err(e) => {
                args.problem(
                    field,
                    format!("expected an array or a JSON-encoded array, received a string that is not valid JSON ({e})"),
                );
                None
            }
        },
        other => {
            args.problem(
                field,
                format!(
                    "expected an array or a JSON-encoded array, received {}",
                    describe(other)
                ),
            );
            None
        }
    }
}

/// An array of strings, as [`json_array`] reads it.
pub(crate) fn string_array(
    args: &mut Args<'_>,
    raw: &Map<String, Value>,
    field: &str,
) -> Vec<String> {
    let Some(items) = json_array(args, raw, field) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match item {
            Value::String(s) => out.push(s),
            other => {
                args.problem(
                    field,
                    format!("item {i}: expected a string, received {}", describe(&other)),
                );
                return Vec::new();
            }
        }
    }
    out
}

/// The first string among `names` in a step object.
pub(super) fn first_string(object: &Map<String, Value>, names: &[&str]) -> Option<String> {
    names.iter().find_map(|name| {
        object
            .get(*name)
            .and_then(Value::as_str)
            .map(str::to_string)
    })
}

/// Strings and numbers of a pass-through field, as text.
pub(super) fn texts(value: Option<&Value>) -> Vec<String> {
    let one = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match value {
        Some(Value::Array(items)) => items.iter().filter_map(one).collect(),
        Some(v) => one(v).into_iter().collect(),
        None => Vec::new(),
    }
}

/// Step normalisation: title ← first string of title, action, name, step; description ←
/// first string of description, detail, details, info ("Step N" and "" when missing);
/// files, dependencies, complexity pass through (as text).
pub(crate) fn normalize_step(position: usize, object: &Map<String, Value>) -> Step {
    Step {
        title: first_string(object, &["title", "action", "name", "step"])
            .unwrap_or_else(|| format!("Step {position}")),
        description: first_string(object, &["description", "detail", "details", "info"])
            .unwrap_or_default(),
        files: texts(object.get("files")),
        dependencies: texts(object.get("dependencies")),
        complexity: texts(object.get("complexity")).into_iter().next(),
    }
}

/// The objects of an array field. With `text_field`, a plain string item stands for the
/// object holding only that field (`risks: ["vendor lock-in"]` is `[{"description":
/// "vendor lock-in"}]`): where a list of objects has one obvious text field, models often
/// send just the text.
pub(super) fn objects(
    args: &mut Args<'_>,
    raw: &Map<String, Value>,
    field: &str,
    text_field: Option<&str>,
) -> Vec<Map<String, Value>> {
    let Some(items) = json_array(args, raw, field) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        match (item, text_field) {
            (Value::Object(object), _) => out.push(object),
            (Value::String(text), Some(name)) => {
                out.push(Map::from_iter([(name.to_string(), Value::String(text))]));
            }
            (other, _) => {
                args.problem(
                    field,
                    format!(
                        "item {i}: expected an object{}, received {}",
                        if text_field.is_some() {
                            " or a string"
                        } else {
                            ""
                        },
                        describe(&other)
                    ),
                );
                return Vec::new();
            }
        }
    }
    out
}

/// A deep_planning refusal: its message (nothing recorded).
pub(super) fn refused(message: impl Into<String>) -> ToolError {
    ToolError::validation(DEEP_PLANNING, vec![message.into()])
}

impl PlanArgs {
    /// Decodes and checks what the arguments alone decide; the phase machine and the
    /// approaches are checked against the stored session ([`decide_planning`]).
    pub(crate) fn parse(raw: &Map<String, Value>) -> Result<Self, ToolError> {
        let mut args = Args::new(raw);
        let phase_text = args.string_limited(&["phase"], false, MAX_ID_BYTES);
        let Some(phase_text) = phase_text else {
            finish(DEEP_PLANNING, args)?;
            return Err(refused(
                "deep_planning requires a \"phase\": init, clarify, explore, evaluate or finalize",
            ));
        };
        let Some(phase) = PHASES.iter().copied().find(|p| *p == phase_text.trim()) else {
            return Err(refused(format!(
                "Unknown phase {:?}: use init, clarify, explore, evaluate or finalize",
                describe_short(&phase_text)
            )));
        };
        // Every field is read (and its type checked) whatever the phase, so a call is
        // refused for a malformed field even where the phase does not use it.
        let nonblank = |text: Option<String>| text.filter(|t| !t.trim().is_empty());
        let session_id = args.string_limited(&["sessionId", "session_id"], false, MAX_ID_BYTES);
        let problem = nonblank(args.string(&["problem"], false));
        let context = nonblank(args.string(&["context"], false));
        let constraints = string_array(&mut args, raw, "constraints");
        let question = nonblank(args.string(&["question"], false));
        let answer = nonblank(args.string(&["answer"], false));
        let branch_id =
            nonblank(args.string_limited(&["branchId", "branch_id"], false, MAX_ID_BYTES));
        let name = nonblank(args.string(&["name"], false));
        let description = nonblank(args.string(&["description"], false));
        let pros = string_array(&mut args, raw, "pros");
        let cons = string_array(&mut args, raw, "cons");
        let criteria = branches::criteria(&mut args, raw, branches::PLAN_WEIGHTS, DEEP_PLANNING);
        let rationale = nonblank(args.string(&["rationale"], false));
        let recommendation = branches::recommendation(&mut args, DEEP_PLANNING)?;
        let selected = nonblank(args.string_limited(
            &["selectedBranch", "selected_branch"],
            false,
            MAX_ID_BYTES,
        ));
        let steps = objects(&mut args, raw, "steps", None);
        let risks = objects(&mut args, raw, "risks", Some("description"));
        let assumptions = string_array(&mut args, raw, "assumptions");
        let success_criteria = string_array(&mut args, raw, "successCriteria");
        let mut format = "markdown";
        if let Some(text) = args.string_limited(&["format"], false, MAX_ID_BYTES) {
            match text.trim().to_ascii_lowercase().as_str() {
                "markdown" => format = "markdown",
                "json" => format = "json",
                _ => args.problem(
                    "format",
                    format!(
                        "unknown format {}; use markdown or json",
                        describe_short(&text)
                    ),
                ),
            }
        }
        let risks: Vec<Risk> = risks
            .iter()
            .enumerate()
            .filter_map(
                |(i, risk)| match first_string(risk, &["description", "risk"]) {
                    Some(description) => Some(Risk {
                        description,
                        mitigation: first_string(risk, &["mitigation"]).unwrap_or_default(),
                    }),
                    None => {
                        args.problem("risks", format!("item {i}: needs a \"description\" string"));
                        None
                    }
                },
            )
            .collect();
        finish(DEEP_PLANNING, args)?;
        let body = match phase {
            "init" => Body::PlanInitialized(PlanInit {
                problem: problem.ok_or_else(|| refused("init requires a \"problem\" field"))?,
                context,
                constraints,
            }),
            "clarify" => Body::PlanClarified(Clarification {
                question: question
                    .ok_or_else(|| refused("clarify requires a \"question\" field"))?,
                answer,
            }),
            "explore" => {
                let (Some(branch_id), Some(name)) = (branch_id, name) else {
                    return Err(refused("explore requires \"branchId\" and \"name\""));
                };
                Body::ApproachExplored(Approach {
                    branch_id,
                    name,
                    description,
                    pros,
                    cons,
                })
            }
            "evaluate" => Body::BranchEvaluated(Evaluation {
                branch_id: branch_id.ok_or_else(|| refused("evaluate requires a \"branchId\""))?,
                score: weighted_score(&criteria),
                criteria,
                rationale,
                recommendation: Some(recommendation.unwrap_or("refine").to_string()),
            }),
            _ => Body::PlanFinalized(FinalPlan {
                selected_branch: selected
                    .ok_or_else(|| refused("finalize requires a \"selectedBranch\""))?,
                steps: steps
                    .iter()
                    .enumerate()
                    .map(|(i, step)| normalize_step(i + 1, step))
                    .collect(),
                risks,
                assumptions,
                success_criteria,
            }),
        };
        Ok(PlanArgs {
            phase,
            session_id: if phase == "init" { None } else { session_id },
            alias: if phase == "init" {
                new_plan_id()
            } else {
                String::new()
            },
            body,
            format,
        })
    }
}
