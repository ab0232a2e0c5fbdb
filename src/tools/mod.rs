//! The tool families, one module each, and what they share.
//!
//! Owns: [`FAMILIES`] (the one list of families; toolsets, routing, `tools/list`, server
//! instructions, session kinds and payload codecs all derive from it), [`Family`] (what a
//! family registers), [`Toolset`] selection, and [`ToolError`] and how each error
//! reaches the model. A call's context ([`ToolCall`], [`ToolContext`], [`Request`]) is
//! [`crate::request`]'s; what the families read of stored sessions is [`crate::query`]'s. Each family module owns its tools'
//! definitions (schema, description, annotations), argument parsing, a pure `decide`,
//! its payloads ([`crate::event::FamilyEvent`]) and how they fold; writes go through
//! [`write`]. Must not: write stdout, open store tables, or answer before the store
//! acknowledged the events.

pub(crate) mod agent;
pub(crate) mod args;
pub(crate) mod booster;
pub(crate) mod export;
pub(crate) mod ledger;
#[cfg(test)]
pub(crate) mod note;
pub(crate) mod planning;
pub(crate) mod qa;
pub(crate) mod thinking;
pub(crate) mod write;

pub(crate) use crate::event::KindInfo;
use crate::event::PayloadCodec;
use crate::store::{AppendError, StoreError};
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock as Content, Tool};
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;

/// A call's context, defined in [`crate::request`]: re-exported under this path for
/// family code that still names it here.
pub(crate) use crate::request::{ToolCall, ToolContext};

/// Every tool family of this build, in the order `tools/list` shows them. Adding a
/// family is adding its module and one line here.
pub(crate) static FAMILIES: &[&Family] = &[
    &thinking::FAMILY,
    &ledger::FAMILY,
    &export::FAMILY,
    &planning::FAMILY,
    &qa::FAMILY,
    &agent::FAMILY,
    &booster::FAMILY,
    #[cfg(test)]
    &note::FAMILY,
];

/// Payload codecs no toolset owns, whose events any family's session may hold: the
/// model-call event of [`crate::provider`] and the import record of
/// [`crate::provenance`].
pub(crate) static SHARED_CODECS: &[&dyn PayloadCodec] = &[
    &crate::provider::record::MODEL_CALL_CODEC,
    &crate::provenance::EVENTS_IMPORTED_CODEC,
];

/// The registry as the core sees it ([`crate::event::family::Registry`]): [`FAMILIES`]
/// and [`SHARED_CODECS`], handed to the core as a value ([`families`]).
pub(crate) struct Registry;

/// The one instance.
pub(crate) static REGISTRY: Registry = Registry;

impl crate::event::family::Registry for Registry {
    fn codecs(&self) -> Vec<&'static dyn PayloadCodec> {
        let families = FAMILIES.iter().filter_map(|f| f.codec);
        families.chain(SHARED_CODECS.iter().copied()).collect()
    }

    fn kinds(&self) -> Vec<&'static KindInfo> {
        session_kinds().collect()
    }
}

/// The product's families as the core decodes with them ([`FAMILIES`] and
/// [`SHARED_CODECS`]), carrying their folds and their exports: built by the composition
/// root (the command line, a test) and handed to the ledger it opens; nothing below
/// `tools` looks them up.
pub fn families() -> crate::event::family::Families {
    crate::event::family::Families::of(&REGISTRY)
        .carrying(crate::projection::tree::Folds::of(&REGISTRY))
        .carrying(crate::export::family::Exports::of(&REGISTRY))
}

/// The product's folds alone, for the unit tests and fuzz targets that fold a tree
/// without a ledger (a ledger carries them in its [`families`]).
#[cfg(any(test, fuzzing))]
pub(crate) fn folds() -> crate::projection::tree::Folds {
    crate::projection::tree::Folds::of(&REGISTRY)
}

/// The product's exports alone, for the unit tests and fuzz targets that render a tree
/// without a ledger (a ledger carries them in its [`families`]).
#[cfg(any(test, fuzzing))]
pub(crate) fn exports() -> crate::export::family::Exports {
    crate::export::family::Exports::of(&REGISTRY)
}

/// Folds no toolset owns: the model-call event's and the import record's.
pub(crate) static SHARED_FOLDS: &[&dyn crate::projection::tree::Fold] = &[
    &crate::projection::tree::FoldOf::<crate::provider::record::ModelCallEvent>::NEW,
    &crate::projection::tree::FoldOf::<crate::provenance::ImportEvent>::NEW,
];

impl crate::projection::tree::Registry for Registry {
    fn folds(&self) -> Vec<&'static dyn crate::projection::tree::Fold> {
        let families = FAMILIES.iter().flat_map(|f| f.folds.iter().copied());
        families.chain(SHARED_FOLDS.iter().copied()).collect()
    }

    fn family_order(&self) -> Vec<&'static str> {
        crate::event::family::Registry::codecs(self)
            .iter()
            .map(|codec| codec.family())
            .collect()
    }
}

/// Renderers no toolset owns: the model calls' Markdown section, the imports' words.
pub(crate) static SHARED_RENDERS: &[&dyn crate::export::family::FamilyRender] = &[
    &crate::provider::record::MODEL_CALLS_RENDER,
    &crate::provenance::PROVENANCE_RENDER,
];

impl crate::export::family::Registry for Registry {
    fn pictures(&self) -> Vec<&'static crate::export::picture::Pictures> {
        FAMILIES.iter().filter_map(|f| f.picture).collect()
    }

    fn kinds(&self) -> Vec<&'static KindInfo> {
        session_kinds().collect()
    }

    fn renders(&self) -> Vec<&'static dyn crate::export::family::FamilyRender> {
        let families = FAMILIES.iter().filter_map(|f| f.render);
        families.chain(SHARED_RENDERS.iter().copied()).collect()
    }
}

/// Families DESIGN names that this build does not have yet.
pub(crate) const PLANNED: [&str; 0] = [];

/// Bytes of compact JSON of the reference `sequentialthinking` server's `tools/list`
/// answer (its one tool): the unit of the context budgets below, since every listed
/// description and schema is sent with every model request.
pub const REFERENCE_TOOLS_LIST_BYTES: usize = 4_650;

/// Most bytes of compact JSON the default toolsets' `tools/list` may take: under three
/// quarters of the reference's size (issue 41's goal, 3,487), for all the default
/// families' tools together, held at what its second round reached (3,329). Reached by
/// keeping the default to what a model thinking needs (the export toolset is off by
/// default), by descriptions that say it in fewer words, and by saying once, in the
/// server instructions, that counts start at 1 (see `tools::args`).
pub const DEFAULT_TOOLS_LIST_BUDGET_BYTES: usize = 3_340;

/// Most bytes of compact JSON `--toolsets all` may take: what issue 41's second round
/// reached (13,934; the first reached 15,541), under its goal of 3 × the reference
/// (13,950). Reached without dropping a tool, an argument, a type union, an enum, a
/// `required` list or an annotation: bounds and item shapes the server checks are said
/// once in words rather than on every field (the scores' 0-10, counts from 1, a qa
/// step's shape), and the descriptions lost what a call does not need (defaults, what
/// an answer says for itself).
pub const ALL_TOOLS_LIST_BUDGET_BYTES: usize = 13_940;

/// The answer of one tool call, as a family's `call` returns it: complete, or (protocol
/// 2026-07-28) input required from the client before it can complete.
pub(crate) type CallFuture =
    Pin<Box<dyn Future<Output = Result<CallToolResponse, ToolError>> + Send>>;

/// What a tool family registers.
pub(crate) struct Family {
    /// Its toolset's name (`serve --toolsets NAME`).
    pub name: &'static str,
    /// Its part of the server instructions: the set's name and, in a few words, what it is
    /// for (`tools/list` names its tools).
    pub instructions: &'static str,
    /// Whether it is on when no toolset is chosen (the context budget of DESIGN §5).
    pub default_on: bool,
    /// Most bytes of compact JSON its toolset's `tools/list` answer may take (the test
    /// suite measures every toolset against its own); README's toolset table gives the
    /// measured size. Raising it is a decision about every model request's cost.
    pub listing_budget_bytes: usize,
    /// The tools it lists.
    pub tools: fn() -> Vec<Tool>,
    /// Other names its tools answer to, not listed (other servers' spellings).
    pub aliases: &'static [&'static str],
    /// Runs one call of one of its tools (listed or alias).
    pub call: fn(ToolCall) -> CallFuture,
    /// Whether its calls may ask the client something while they run (sampling a model,
    /// progress notifications): such calls always take rmcp's request handling, which ties
    /// the client's answers to them; the others may be answered by the stdio transport
    /// directly ([`crate::transport::DirectCalls`]).
    pub asks_the_client: bool,
    /// The session kinds it records.
    pub kinds: &'static [KindInfo],
    /// The codec of its payloads, if it records any of its own.
    pub codec: Option<&'static dyn PayloadCodec>,
    /// How its payloads fold into a thought tree: one [`FoldOf`] per payload type its
    /// codec decodes to (see [`crate::projection::tree`]).
    ///
    /// [`FoldOf`]: crate::projection::tree::FoldOf
    pub folds: &'static [&'static dyn crate::projection::tree::Fold],
    /// What it adds to the SVG and HTML pictures of a session (nodes, links, marks on
    /// thoughts), if anything: see [`crate::export::picture`].
    pub picture: Option<&'static crate::export::picture::Pictures>,
    /// What it adds to the Markdown and Mermaid exports, if anything: see
    /// [`crate::export::family`].
    pub render: Option<&'static dyn crate::export::family::FamilyRender>,
    /// The prompts it offers (listed where their tool is on: [`crate::prompts`]).
    pub(crate) prompts: &'static [&'static dyn crate::prompts::FamilyPrompt],
    /// What `doctor` checks of its own files in the data directory, if anything.
    pub doctor: Option<&'static dyn DoctorCheck>,
}

/// A check `doctor` runs for a family over the data directory (its own files there: the
/// qa family's workflow templates).
pub(crate) trait DoctorCheck: Sync {
    /// What the report's lines name ("qa workflows").
    fn what(&self) -> &'static str;
    /// Every problem found under `data_dir`, each with its fix: each fails the check.
    fn problems(&self, data_dir: &std::path::Path) -> Vec<(String, &'static str)>;
}

/// Every registered session kind.
pub(crate) fn session_kinds() -> impl Iterator<Item = &'static KindInfo> {
    FAMILIES.iter().flat_map(|family| family.kinds.iter())
}

/// Registered kind names, for messages: "thinking or think".
pub(crate) fn kind_names() -> String {
    let names: Vec<&str> = session_kinds().map(|k| k.kind.as_str()).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A family of tools that can be switched on as a whole: a registered [`Family`].
#[derive(Clone, Copy)]
pub struct Toolset {
    /// Position in [`FAMILIES`] (orders `tools/list`).
    index: usize,
}

impl Toolset {
    pub(crate) fn family(self) -> &'static Family {
        FAMILIES[self.index]
    }

    /// The bytes its tools may take in `tools/list` ([`Family::listing_budget_bytes`]).
    pub fn listing_budget_bytes(self) -> usize {
        self.family().listing_budget_bytes
    }

    pub fn as_str(self) -> &'static str {
        self.family().name
    }

    /// Every toolset this build provides.
    pub fn available() -> Vec<Toolset> {
        (0..FAMILIES.len()).map(|index| Toolset { index }).collect()
    }

    /// Toolsets on when nothing is chosen.
    pub(crate) fn default_sets() -> Vec<Toolset> {
        Toolset::available()
            .into_iter()
            .filter(|t| t.family().default_on)
            .collect()
    }

    /// The tools this set lists.
    pub(crate) fn tools(self) -> Vec<Tool> {
        (self.family().tools)()
    }

    /// "thinking, ledger": the names for messages.
    fn names() -> String {
        let names: Vec<&str> = FAMILIES.iter().map(|f| f.name).collect();
        names.join(", ")
    }

    /// Parses `a,b` (or `all`) into a de-duplicated list in registration order.
    pub(crate) fn parse_list(text: &str) -> Result<Vec<Toolset>, String> {
        let mut out = Vec::new();
        for name in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if name.eq_ignore_ascii_case("all") {
                out.extend(Toolset::available());
            } else {
                out.push(name.parse()?);
            }
        }
        if out.is_empty() {
            return Err(format!("no toolset named: use {} or all", Toolset::names()));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }
}

impl PartialEq for Toolset {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index
    }
}
impl Eq for Toolset {}
impl PartialOrd for Toolset {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Toolset {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.index.cmp(&other.index)
    }
}

impl fmt::Debug for Toolset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Toolset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Toolset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        if let Some(index) = FAMILIES.iter().position(|f| f.name == lower) {
            return Ok(Toolset { index });
        }
        let available = Toolset::names();
        if PLANNED.contains(&lower.as_str()) {
            return Err(format!(
                "toolset {lower:?} is not in this build yet; available: {available}, all"
            ));
        }
        Err(format!(
            "unknown toolset {s:?}; available: {available}, all"
        ))
    }
}

/// Why a tool call failed, and how the model is told.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ToolError {
    /// Arguments the model can fix: the reference server's validation text.
    #[error("Input validation error: Invalid arguments for tool {tool}: {}", problems.join(", "))]
    Validation { tool: String, problems: Vec<String> },
    /// A storage failure: nothing was recorded.
    #[error("{0}")]
    Store(#[from] StoreError),
    /// The store refused the events: nothing was recorded.
    #[error("{0}")]
    Append(#[from] AppendError),
    /// The client cancelled the call before it was recorded.
    #[error("the client cancelled {tool} before it was recorded: nothing was recorded")]
    Cancelled { tool: String },
    /// The tool panicked: nothing was recorded.
    #[error("internal error in tool {tool}: {message}")]
    Panicked { tool: String, message: String },
}

impl ToolError {
    pub(crate) fn validation(tool: &str, problems: Vec<String>) -> Self {
        ToolError::Validation {
            tool: tool.to_string(),
            problems,
        }
    }

    /// The tool result the model sees: `isError: true`, no structured content.
    pub(crate) fn into_result(self) -> CallToolResult {
        let text = match &self {
            ToolError::Validation { .. } => self.to_string(),
            _ => serde_json::to_string_pretty(&serde_json::json!({
                "error": self.to_string(),
                "status": "failed",
            }))
            .expect("json"),
        };
        CallToolResult::error(vec![Content::text(text)])
    }
}

/// A successful answer: pretty JSON text plus the same object as structured content.
pub(crate) fn structured_result(value: Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).expect("json");
    let mut result = CallToolResult::success(vec![Content::text(text)]);
    result.structured_content = Some(value);
    result
}

/// Builds a tool definition from JSON schemas. Everything in it is sent with every model
/// request: a `title` only where clients show one that the name does not already say
/// (the reference's tools have theirs), an output schema only where a client gains from
/// it (MCP: declared, the structured content must conform to it).
pub(crate) fn tool_definition(
    name: &'static str,
    title: Option<&'static str>,
    description: &'static str,
    input_schema: Value,
    output_schema: Option<Value>,
    annotations: rmcp::model::ToolAnnotations,
) -> Tool {
    let Value::Object(input) = input_schema else {
        panic!("input schema of {name} must be an object");
    };
    let mut tool = Tool::new(name, description, Arc::new(input)).with_annotations(annotations);
    if let Some(title) = title {
        tool = tool.with_title(title);
    }
    if let Some(Value::Object(output)) = output_schema {
        tool = tool.with_raw_output_schema(Arc::new(output));
    }
    tool
}

/// Annotations of a tool that appends to the ledger: not read-only, not idempotent (a
/// repeated call records a second event), not destructive, closed world. The first two
/// are MCP's defaults, so only the other two are sent; the title is the tool's own
/// (`title`), not repeated here.
pub(crate) fn writing_annotations() -> rmcp::model::ToolAnnotations {
    rmcp::model::ToolAnnotations::new()
        .destructive(false)
        .open_world(false)
}

/// Annotations of a tool that only reads the ledger: read-only, closed world. (MCP reads
/// `destructiveHint` and `idempotentHint` only when a tool is not read-only, so they
/// are not sent.)
pub(crate) fn reading_annotations() -> rmcp::model::ToolAnnotations {
    rmcp::model::ToolAnnotations::new()
        .read_only(true)
        .open_world(false)
}
