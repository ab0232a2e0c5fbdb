//! Verification workflows as data, and the pure recommendation computed from them.
//!
//! Owns: the template format ([`Template`], JSON: the book's "Workflow templates"), the
//! built-in templates (`data/workflows/*.json`, compiled in), loading user templates
//! from `<data dir>/workflows/*.json` ([`Workflows::load`]: a malformed file is reported
//! with its path, line and column, and the others keep working), routing a thought to a
//! workflow ([`Workflows::route`]) and the recommended step with its tools filtered and
//! ranked by the caller's available tools ([`recommend_step`]). Must not: do I/O outside
//! [`Workflows::load`], or change what the caller wrote.

use super::payload::{SUBSTITUTE_FACTOR, Step, ToolRecommendation};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The built-in templates, in routing order (the first whose keywords match wins; the
/// generic one matches nothing and is the fallback).
const BUILT_IN: [(&str, &str); 5] = [
    (
        "version_verification.json",
        include_str!("../../../data/workflows/version_verification.json"),
    ),
    (
        "syntax_validation.json",
        include_str!("../../../data/workflows/syntax_validation.json"),
    ),
    (
        "compatibility_check.json",
        include_str!("../../../data/workflows/compatibility_check.json"),
    ),
    (
        "test.json",
        include_str!("../../../data/workflows/test.json"),
    ),
    (
        "generic.json",
        include_str!("../../../data/workflows/generic.json"),
    ),
];

/// Name of the fallback workflow (a built-in; a user template may replace it).
pub(crate) const GENERIC: &str = "generic";

/// Folder of the data directory that holds user templates.
pub(crate) const TEMPLATE_DIR: &str = "workflows";

/// Most user template files read (the first ones by file name).
pub(crate) const MAX_TEMPLATE_FILES: usize = 64;

/// Largest user template file read, in bytes.
pub(crate) const MAX_TEMPLATE_BYTES: u64 = 256 * 1024;

/// Most steps, tools per step, and list items (keywords, conditions, alternatives,
/// substitutes, matches) a template may hold.
pub(crate) const MAX_TEMPLATE_ITEMS: usize = 32;

/// Longest text in a template (names, descriptions, rationales), in bytes.
pub(crate) const MAX_TEMPLATE_TEXT_BYTES: usize = 2_048;

/// Multiplier of every confidence when the thought revises an earlier one.
pub(crate) const REVISION_FACTOR: f64 = 0.9;
/// Multiplier when a verification target is given and names none of the workflow's
/// keywords.
pub(crate) const TARGET_MISMATCH_FACTOR: f64 = 0.85;

/// One workflow template, as its JSON file holds it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Template {
    #[serde(deserialize_with = "name")]
    pub name: String,
    /// Part of the format (checked as text), shown nowhere yet.
    #[serde(default, deserialize_with = "text")]
    #[allow(dead_code)]
    pub description: String,
    /// Words (case-insensitive, anywhere in the thought or the target) that route a
    /// thought here.
    #[serde(deserialize_with = "words")]
    pub keywords: Vec<String>,
    /// Words that route here when found in the verification target only.
    #[serde(default, deserialize_with = "words")]
    pub target_keywords: Vec<String>,
    #[serde(deserialize_with = "steps")]
    pub steps: Vec<TemplateStep>,
    /// The step recommended after the last one (default: the generic workflow's).
    #[serde(default)]
    pub later: Option<TemplateStep>,
}

/// A step of a template.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TemplateStep {
    #[serde(deserialize_with = "text")]
    pub step_description: String,
    #[serde(deserialize_with = "text")]
    pub expected_outcome: String,
    #[serde(deserialize_with = "tools")]
    pub tools: Vec<TemplateTool>,
    #[serde(default, deserialize_with = "texts")]
    pub next_step_conditions: Vec<String>,
    /// Outcomes that call for a revision of an earlier step.
    #[serde(default, deserialize_with = "texts")]
    pub revise_when: Vec<String>,
    /// Outcomes that call for a branch.
    #[serde(default, deserialize_with = "texts")]
    pub branch_when: Vec<String>,
}

/// A tool a template step recommends.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TemplateTool {
    #[serde(deserialize_with = "name")]
    pub tool_name: String,
    #[serde(deserialize_with = "confidence")]
    pub confidence: f64,
    #[serde(deserialize_with = "priority")]
    pub priority: u64,
    #[serde(deserialize_with = "text")]
    pub rationale: String,
    /// Shown to the model as given (other commands, other ways).
    #[serde(default, deserialize_with = "texts")]
    pub alternatives: Vec<String>,
    /// Tool names that can stand in, in order of preference.
    #[serde(default, deserialize_with = "words")]
    pub substitutes: Vec<String>,
    /// Parts of a tool name (case-insensitive) that make one of the caller's tools a
    /// stand-in when neither the tool nor a substitute is available.
    #[serde(default, deserialize_with = "words")]
    pub matches: Vec<String>,
    #[serde(default)]
    pub suggested_inputs: Option<Value>,
}

fn bounded_text<E: serde::de::Error>(text: String, what: &str) -> Result<String, E> {
    if text.len() > MAX_TEMPLATE_TEXT_BYTES {
        return Err(E::custom(format!(
            "{what} is {} bytes, at most {MAX_TEMPLATE_TEXT_BYTES}",
            text.len()
        )));
    }
    Ok(text)
}

fn bounded_list<T, E: serde::de::Error>(items: Vec<T>, what: &str) -> Result<Vec<T>, E> {
    if items.len() > MAX_TEMPLATE_ITEMS {
        return Err(E::custom(format!(
            "{} {what}, at most {MAX_TEMPLATE_ITEMS}",
            items.len()
        )));
    }
    Ok(items)
}

fn name<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = bounded_text(String::deserialize(d)?, "a name")?;
    if text.trim().is_empty() {
        return Err(serde::de::Error::custom("a name must not be empty"));
    }
    Ok(text)
}

fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    bounded_text(String::deserialize(d)?, "a text")
}

fn texts<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let items = bounded_list(Vec::<String>::deserialize(d)?, "items")?;
    items
        .into_iter()
        .map(|t| bounded_text(t, "an item"))
        .collect()
}

/// Lowercased, non-empty words.
fn words<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let items = texts(d)?;
    if items.iter().any(|w| w.trim().is_empty()) {
        return Err(serde::de::Error::custom("a keyword must not be empty"));
    }
    Ok(items.into_iter().map(|w| w.trim().to_lowercase()).collect())
}

fn steps<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<TemplateStep>, D::Error> {
    let steps = bounded_list(Vec::<TemplateStep>::deserialize(d)?, "steps")?;
    if steps.is_empty() {
        return Err(serde::de::Error::custom(
            "a workflow needs at least one step",
        ));
    }
    Ok(steps)
}

fn tools<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<TemplateTool>, D::Error> {
    bounded_list(Vec::<TemplateTool>::deserialize(d)?, "tools")
}

fn confidence<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let value = f64::deserialize(d)?;
    if !(0.0..=1.0).contains(&value) {
        return Err(serde::de::Error::custom(format!(
            "confidence {value} is not within 0..1"
        )));
    }
    Ok(value)
}

fn priority<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let value = u64::deserialize(d)?;
    if value < 1 {
        return Err(serde::de::Error::custom("priority counts from 1"));
    }
    Ok(value)
}

/// Parses one template file's text; the error names the line and column.
pub(crate) fn parse_template(text: &str) -> Result<Template, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// The workflows a call can be routed to: user templates first (a user template named
/// like a built-in replaces it), then the built-ins; and the problems met loading them.
#[derive(Clone, Debug)]
pub(crate) struct Workflows {
    pub templates: Vec<Template>,
    /// `path:line:column: message` for each user template that could not be read.
    pub errors: Vec<String>,
}

impl Workflows {
    /// The built-in templates only (parsed once per process).
    pub(crate) fn built_in() -> Workflows {
        static PARSED: std::sync::OnceLock<Vec<Template>> = std::sync::OnceLock::new();
        let templates = PARSED.get_or_init(|| {
            BUILT_IN
                .iter()
                .map(|(file, text)| {
                    parse_template(text)
                        .unwrap_or_else(|e| panic!("built-in workflow {file} is malformed: {e}"))
                })
                .collect()
        });
        Workflows {
            templates: templates.clone(),
            errors: Vec::new(),
        }
    }

    /// The built-ins plus the user templates in `data_dir/workflows/*.json`. A missing
    /// folder is no error; a file that cannot be read or parsed is skipped and reported.
    pub(crate) fn load(data_dir: Option<&Path>) -> Workflows {
        let mut workflows = Workflows::built_in();
        let Some(dir) = data_dir.map(|d| d.join(TEMPLATE_DIR)) else {
            return workflows;
        };
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return workflows;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
            .collect();
        files.sort();
        if files.len() > MAX_TEMPLATE_FILES {
            workflows.errors.push(format!(
                "{}: {} template files, only the first {MAX_TEMPLATE_FILES} are read",
                dir.display(),
                files.len()
            ));
            files.truncate(MAX_TEMPLATE_FILES);
        }
        let mut user: Vec<Template> = Vec::new();
        for path in files {
            match read_template(&path) {
                Ok(template) => {
                    if user.iter().any(|t| t.name == template.name) {
                        workflows.errors.push(format!(
                            "{}: a workflow named {:?} was already read from another file",
                            path.display(),
                            template.name
                        ));
                        continue;
                    }
                    user.push(template)
                }
                Err(message) => workflows
                    .errors
                    .push(format!("{}: {message}", path.display())),
            }
        }
        workflows
            .templates
            .retain(|built_in| !user.iter().any(|t| t.name == built_in.name));
        user.append(&mut workflows.templates);
        workflows.templates = user;
        for error in &workflows.errors {
            tracing::warn!("workflow template skipped: {error}");
        }
        workflows
    }

    fn generic(&self) -> &Template {
        self.templates
            .iter()
            .find(|t| t.name == GENERIC)
            .or_else(|| self.templates.last())
            .expect("the built-in workflows are never empty")
    }

    /// The workflow for a thought: the first whose keyword appears in the thought or the
    /// target (or whose target keyword appears in the target); else the one the
    /// session's first thought (its title) routes to; else the generic one. Returns it
    /// with the reason.
    pub(crate) fn route(
        &self,
        thought: &str,
        target: Option<&str>,
        title: Option<&str>,
    ) -> Routed<'_> {
        let target_lower = target.unwrap_or("").to_lowercase();
        let text = format!("{} {target_lower}", thought.to_lowercase());
        if let Some(routed) = self.route_text(&text, &target_lower, "this step") {
            return routed;
        }
        if let Some(title) = title
            && let Some(mut routed) = self.route_text(&title.to_lowercase(), "", "")
        {
            routed.reason = format!(
                "this step names no workflow keyword; the session's first step mentions {:?}",
                routed.keyword
            );
            return routed;
        }
        Routed {
            template: self.generic(),
            keyword: String::new(),
            reason: "no workflow keyword in the thought or the target".into(),
        }
    }

    fn route_text(&self, text: &str, target: &str, whose: &str) -> Option<Routed<'_>> {
        for template in &self.templates {
            if let Some(word) = template.keywords.iter().find(|w| text.contains(w.as_str())) {
                return Some(Routed {
                    template,
                    keyword: word.clone(),
                    reason: format!("{whose} mentions {word:?}"),
                });
            }
            if let Some(word) = template
                .target_keywords
                .iter()
                .find(|w| target.contains(w.as_str()))
            {
                return Some(Routed {
                    template,
                    keyword: word.clone(),
                    reason: format!("the verification target mentions {word:?}"),
                });
            }
        }
        None
    }

    /// The step to do at `position` (1-based) of `template`: its own step, or after the
    /// last one its `later` step (else the generic workflow's).
    pub(crate) fn step_at<'a>(&'a self, template: &'a Template, position: u64) -> &'a TemplateStep {
        let index = position.saturating_sub(1);
        if let Some(step) = usize::try_from(index)
            .ok()
            .and_then(|i| template.steps.get(i))
        {
            return step;
        }
        let generic = self.generic();
        template
            .later
            .as_ref()
            .or(generic.later.as_ref())
            .unwrap_or_else(|| generic.steps.last().expect("steps are never empty"))
    }

    /// Descriptions of the steps after `position` (none past the template's steps).
    pub(crate) fn remaining_after(template: &Template, position: u64) -> Vec<String> {
        let from = usize::try_from(position).unwrap_or(usize::MAX);
        template
            .steps
            .iter()
            .skip(from)
            .map(|s| s.step_description.clone())
            .collect()
    }
}

fn read_template(path: &Path) -> Result<Template, String> {
    let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    if size > MAX_TEMPLATE_BYTES {
        return Err(format!(
            "{size} bytes, larger than the {MAX_TEMPLATE_BYTES} a template may have"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    parse_template(&text)
}

/// A routing decision.
#[derive(Clone, Debug)]
pub(crate) struct Routed<'a> {
    pub template: &'a Template,
    /// The keyword that matched (empty for the fallback).
    pub keyword: String,
    pub reason: String,
}

/// The caller's tools, for lookups: names as given, and lowercased.
#[derive(Clone, Debug, Default)]
pub(crate) struct Available {
    names: Vec<String>,
    /// `names`, lowercased (same positions).
    lower_names: Vec<String>,
    /// Position of each lowercased name (the first, when two differ only in case).
    lower: std::collections::HashMap<String, usize>,
}

/// Separators between a server prefix and a tool name (`fs:read_file`,
/// `mcp__fs__read_file`, `fs.read_file`, `fs/read_file`).
const PREFIX_SEPARATORS: [&str; 4] = [":", "__", ".", "/"];

impl Available {
    pub(crate) fn new(names: &[String]) -> Available {
        let lower_names: Vec<String> = names.iter().map(|n| n.to_lowercase()).collect();
        let mut lower = std::collections::HashMap::with_capacity(names.len());
        for (index, name) in lower_names.iter().enumerate() {
            lower.entry(name.clone()).or_insert(index);
        }
        Available {
            names: names.to_vec(),
            lower_names,
            lower,
        }
    }

    /// The caller's spelling of `tool`: the same name in any case, or a name that ends in
    /// it after a server prefix.
    pub(crate) fn find(&self, tool: &str) -> Option<&str> {
        let wanted = tool.to_lowercase();
        if let Some(&index) = self.lower.get(&wanted) {
            return Some(&self.names[index]);
        }
        let index = self.lower_names.iter().position(|lower| {
            lower
                .strip_suffix(wanted.as_str())
                .is_some_and(|rest| PREFIX_SEPARATORS.iter().any(|sep| rest.ends_with(sep)))
        })?;
        Some(&self.names[index])
    }

    /// The first of the caller's tools whose name contains one of `parts`, skipping
    /// `taken`.
    fn containing(&self, parts: &[String], taken: &[String]) -> Option<&str> {
        parts.iter().find_map(|part| {
            let index = (0..self.names.len()).find(|&index| {
                self.lower_names[index].contains(part.as_str())
                    && !taken.contains(&self.names[index])
            })?;
            Some(self.names[index].as_str())
        })
    }
}

/// What shapes the confidence of a recommendation besides the template.
#[derive(Clone, Debug, Default)]
pub(crate) struct Context<'a> {
    /// The caller's tools, when it sent them (`None`: nothing is filtered).
    pub available: Option<&'a Available>,
    /// The thought this step revises, when it is a revision.
    pub revises: Option<u64>,
    /// The verification target, when given.
    pub target: Option<&'a str>,
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

/// Whether `target` names one of the template's keywords (a target naming none lowers
/// the confidence).
fn target_matches(template: &Template, target: &str) -> bool {
    let target = target.to_lowercase();
    template
        .keywords
        .iter()
        .chain(&template.target_keywords)
        .any(|w| target.contains(w.as_str()))
}

/// The recommendation for one template step: its tools resolved against the caller's
/// (an unavailable tool replaced by a substitute with lower confidence, or dropped),
/// confidences adjusted and explained, ranked by priority then confidence.
pub(crate) fn recommend_step(
    template: &Template,
    step: &TemplateStep,
    context: &Context<'_>,
) -> Step {
    let mut shared: Vec<(f64, String)> = Vec::new();
    if let Some(revises) = context.revises {
        shared.push((
            REVISION_FACTOR,
            format!("×{REVISION_FACTOR}: this step revises thought {revises}"),
        ));
    }
    if let Some(target) = context.target
        && template.name != GENERIC
        && !target_matches(template, target)
    {
        shared.push((
            TARGET_MISMATCH_FACTOR,
            format!(
                "×{TARGET_MISMATCH_FACTOR}: the target names none of the {} keywords",
                template.name
            ),
        ));
    }
    let mut taken: Vec<String> = Vec::new();
    let mut tools: Vec<ToolRecommendation> = Vec::new();
    for tool in &step.tools {
        let mut factors = shared.clone();
        let name = match context.available {
            None => tool.tool_name.clone(),
            Some(available) => {
                let direct = available.find(&tool.tool_name).map(str::to_string);
                let stand_in = direct.is_none().then(|| {
                    tool.substitutes
                        .iter()
                        .find_map(|s| available.find(s))
                        .or_else(|| available.containing(&tool.matches, &taken))
                        .map(str::to_string)
                });
                match (direct, stand_in.flatten()) {
                    (Some(name), _) => name,
                    (None, Some(name)) => {
                        factors.insert(
                            0,
                            (
                                SUBSTITUTE_FACTOR,
                                format!(
                                    "×{SUBSTITUTE_FACTOR}: stands in for {}, which you do not have",
                                    tool.tool_name
                                ),
                            ),
                        );
                        name
                    }
                    (None, None) => continue,
                }
            }
        };
        if taken.contains(&name) {
            continue;
        }
        taken.push(name.clone());
        let confidence = round2(factors.iter().fold(tool.confidence, |c, (f, _)| c * f));
        let mut why = if factors.is_empty() {
            "as the workflow gives it".to_string()
        } else {
            format!("the workflow's {}", tool.confidence)
        };
        for (_, reason) in &factors {
            why.push_str("; ");
            why.push_str(reason);
        }
        if context.available.is_none() {
            why.push_str("; not checked against your tools (send available_client_tools)");
        }
        tools.push(ToolRecommendation {
            tool_name: name,
            confidence,
            rationale: format!("{} (confidence {confidence}: {why})", tool.rationale),
            priority: tool.priority,
            alternatives: tool.alternatives.clone(),
            suggested_inputs: tool.suggested_inputs.clone(),
        });
    }
    tools.sort_by(|a, b| {
        a.priority
            .cmp(&b.priority)
            .then(b.confidence.total_cmp(&a.confidence))
    });
    Step {
        step_description: step.step_description.clone(),
        expected_outcome: step.expected_outcome.clone(),
        recommended_tools: tools,
        next_step_conditions: step.next_step_conditions.clone(),
        revise_when: step.revise_when.clone(),
        branch_when: step.branch_when.clone(),
    }
}

/// `doctor`'s check of the workflow templates in the data directory: every file that
/// does not load fails it, naming the line.
pub(crate) struct WorkflowCheck;

/// The one instance (the qa family's `doctor`).
pub(crate) static WORKFLOW_CHECK: WorkflowCheck = WorkflowCheck;

impl crate::tools::DoctorCheck for WorkflowCheck {
    fn what(&self) -> &'static str {
        "qa workflows"
    }

    fn problems(&self, data_dir: &std::path::Path) -> Vec<(String, &'static str)> {
        Workflows::load(Some(data_dir))
            .errors
            .into_iter()
            .map(|error| {
                (
                    error,
                    "fix the file at the line named, or move it out of the workflows folder",
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::qa::payload::stands_in_for;

    #[test]
    fn built_in_templates_parse_and_route_by_the_spec_keywords() {
        let workflows = Workflows::built_in();
        let route = |thought: &str, target: Option<&str>| {
            workflows.route(thought, target, None).template.name.clone()
        };
        assert_eq!(
            route("Check the installed PACKAGE", None),
            "version_verification"
        );
        assert_eq!(route("check the code style", None), "syntax_validation");
        assert_eq!(route("look at it", Some("the code")), "syntax_validation");
        assert_eq!(route("any breaking changes?", None), "compatibility_check");
        assert_eq!(route("Testing the parser", None), "test");
        assert_eq!(route("look around", None), GENERIC);
        assert_eq!(
            workflows
                .route("look around", None, Some("verify the version"))
                .template
                .name,
            "version_verification"
        );
    }

    #[test]
    fn the_book_example_template_parses() {
        let book = include_str!("../../../docs/src/tools.md");
        let section = book
            .split_once("<!-- ANCHOR: workflow-template -->")
            .expect("the tools chapter documents the template format")
            .1;
        let example = section
            .split_once("```json\n")
            .and_then(|(_, rest)| rest.split_once("```"))
            .expect("an example")
            .0;
        let template = parse_template(example).unwrap();
        assert_eq!(template.name, "deployment");
        assert_eq!(template.steps[0].tools[0].matches, vec!["kube"]);
    }

    #[test]
    fn a_template_error_names_line_and_column() {
        let error = parse_template("{\n  \"name\": \"x\",\n  \"keywords\": [],\n  \"steps\": [{\"step_description\": \"a\", \"expected_outcome\": \"b\", \"tools\": [{\"tool_name\": \"t\", \"confidence\": 1.5, \"priority\": 1, \"rationale\": \"r\"}]}]\n}").unwrap_err();
        assert!(
            error.contains("confidence 1.5") && error.contains("line 4"),
            "{error}"
        );
    }

    #[test]
    fn missing_tools_are_substituted_with_lower_confidence_or_dropped() {
        let workflows = Workflows::built_in();
        let template = &workflows.templates[0];
        let tools = vec!["fs:read_file".to_string(), "run_command".to_string()];
        let available = Available::new(&tools);
        let step = recommend_step(
            template,
            &template.steps[0],
            &Context {
                available: Some(&available),
                ..Context::default()
            },
        );
        let names: Vec<(&str, f64)> = step
            .recommended_tools
            .iter()
            .map(|t| (t.tool_name.as_str(), t.confidence))
            .collect();
        assert_eq!(names, vec![("fs:read_file", 0.9), ("run_command", 0.56)]);
        let stand_ins: Vec<Option<&str>> =
            step.recommended_tools.iter().map(stands_in_for).collect();
        assert_eq!(stand_ins[0], None);
        assert!(
            stand_ins[1].is_some_and(|name| name != "run_command"),
            "{stand_ins:?}"
        );
        let nothing = Available::new(&["unrelated".to_string()]);
        let step = recommend_step(
            template,
            &template.steps[0],
            &Context {
                available: Some(&nothing),
                revises: Some(1),
                target: None,
            },
        );
        assert!(step.recommended_tools.is_empty());
    }
}
