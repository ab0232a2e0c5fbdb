//! Argument decoding with the coercion policy of `specs/thinking.md`.
//!
//! Owns: reading a tool's raw JSON arguments into typed values, accepting the strings
//! clients send for numbers and booleans, and collecting every problem into one error
//! that names each field and the value that was wrong. Must not: guess. "yes" is not
//! true, "false" is never true, 1.5 is not an integer, null is not a value.

use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// Largest integer accepted for counts and seqs: JavaScript's largest safe integer, so
/// every value round-trips through any JSON client.
pub const MAX_INTEGER: u64 = 9_007_199_254_740_991;

/// Longest text accepted in one field, in bytes. A thought longer than this is almost
/// certainly a mistake (a pasted file); the model is told to split it.
pub(crate) const MAX_TEXT_BYTES: usize = 1024 * 1024;

/// Longest identifier (branch id, session id, kind name) accepted, in bytes.
pub(crate) const MAX_ID_BYTES: usize = 256;

// ---- Input schema fragments: the coercion policy, declared ----
//
// The one rule, for every family: **a boolean or integer argument also accepts a
// string**, and the schema says so with a JSON Schema type union:
// `{"type": ["boolean", "string"]}` and `{"type": ["integer", "string"]}`.
// The strings read are "true"/"false" in any case ([`Args::boolean`]) and decimal
// integers, sign, leading zeros and surrounding whitespace allowed
// ([`Args::integer`]); any other string is refused with an error naming the field, the
// value and what to send. So a client that validates arguments against the listed
// schema never refuses what the server takes. The schema does not narrow the string
// branch (a `pattern` per field would cost ~600 bytes of the default `tools/list`, ~13%
// of its budget, on every model request), so strings the parser refuses ("yes",
// "1.5", "0"), a string above a `maximum`, and numbers above [`MAX_INTEGER`] validate
// and are refused by the server; non-strings it refuses (`1`, `null` for a boolean,
// `1.5` for an integer) fail the schema too. Every family builds these fields with
// the helpers below, so the rule is written once (README "Tools" states it for users).
//
// What the schema leaves to words (issue 41: every byte of `tools/list` is paid on every
// model request), each refused by the server with an error naming the rule:
// - that counts, indexes and seqs start at 1: said once, in the server instructions, not
//   as `"minimum": 1` on each of the 22 count fields of `--toolsets all` (264 bytes);
//   a count's `maximum`, where it has one, stays in its schema;
// - that a list's items are strings, where its name says so (kinds, stop, hints): its
//   schema is `{"type": ["array", "string"]}` without `items` (25 bytes a field).

/// The epilogue of a tool's argument parsing: every problem found, as the validation
/// error the model can fix (nothing is recorded), or nothing.
pub(crate) fn finish(tool: &str, args: Args<'_>) -> Result<(), super::ToolError> {
    if args.has_problems() {
        return Err(super::ToolError::validation(tool, args.into_problems()));
    }
    Ok(())
}

/// The argument names `tool` lists (its input schema's properties).
pub(crate) fn property_names(tool: &rmcp::model::Tool) -> Vec<String> {
    tool.input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

/// Schema of a boolean argument: JSON `true`/`false`, or a string ("true"/"false" in
/// any case are read).
pub(crate) fn boolean_schema() -> Value {
    json!({"type": ["boolean", "string"]})
}

/// Schema of a count argument (an integer from 1, as [`Args::integer`] with `min` 1
/// reads it): a JSON integer, or a string (decimal integers are read). That it starts at
/// 1 is the server instructions' (see above); 0 and below are refused, naming the bound.
pub(crate) fn count_schema() -> Value {
    json!({"type": ["integer", "string"]})
}

/// Schema of a count argument of at most `maximum` (a page size).
pub(crate) fn count_schema_up_to(maximum: u64) -> Value {
    let mut schema = count_schema();
    schema["maximum"] = json!(maximum);
    schema
}

/// Schema of a list of strings, as [`Args::string_list`] reads it: an array of strings,
/// or one string of comma-separated items. Its items' type is left to its name (kinds,
/// stop, hints: see above); an item that is not a string is refused, naming the field.
pub(crate) fn string_list_schema() -> Value {
    json!({"type": ["array", "string"]})
}

/// `schema` with a `description`: only where the argument's name is not enough.
pub(crate) fn described(mut schema: Value, description: &str) -> Value {
    schema["description"] = json!(description);
    schema
}

// ---- Arguments nobody read ----
//
// Unknown keys are accepted (clients add their own), but the answer says which were
// ignored, and the name meant where one is close. Every name a parser looks up through
// [`Args`] (or [`note_read`]) is recorded for the call in flight; the server compares the
// call's keys with those and with the tool's schema ([`ignored_arguments`]) and adds the
// note to the answer. Nothing of this is in `tools/list`.

/// The names a call's parsers looked up, when its call records them ([`recording`]).
type ReadNames = Option<Arc<Mutex<BTreeSet<&'static str>>>>;

tokio::task_local! {
    static READ: ReadNames;
}

/// Farthest edit distance at which an ignored key is taken for a misspelt name.
const MAX_SUGGESTION_DISTANCE: usize = 2;

/// Records that a parser looked `names` up (the canonical name and its spellings): keys
/// of those names are not reported as ignored. Outside [`recording`], nothing.
pub(crate) fn note_read(names: &[&'static str]) {
    let _ = READ.try_with(|read| {
        if let Some(read) = read {
            read.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(names.iter().copied());
        }
    });
}

/// Runs `call`, recording the argument names its parsers look up when `record` (a call
/// whose arguments the schema does not all list: only then can a name be ignored);
/// returns its output and those names (none when not recorded). The future holds `call`
/// once (taken by value into the scope, not kept as an argument beside it).
pub(crate) fn recording<F: std::future::Future>(
    call: F,
    record: bool,
) -> impl std::future::Future<Output = (F::Output, BTreeSet<&'static str>)> {
    let read: ReadNames = record.then(Default::default);
    let scoped = READ.scope(read.clone(), call);
    async move {
        let output = scoped.await;
        let names = read
            .map(|read| std::mem::take(&mut *read.lock().unwrap_or_else(|e| e.into_inner())))
            .unwrap_or_default();
        (output, names)
    }
}

/// `f`, made to record into the call in flight when run on another thread
/// (`spawn_blocking`): the recording is task-local and does not cross by itself.
pub(crate) fn carry<R>(f: impl FnOnce() -> R) -> impl FnOnce() -> R {
    let read = READ.try_with(Clone::clone).ok();
    move || match read {
        Some(read) => READ.sync_scope(read, f),
        None => f(),
    }
}

/// The note for the keys of `arguments` that are neither in `known` (the schema's
/// properties) nor among the names the parsers `read`: each named, with the name meant
/// where one is close (case, `_`, or a couple of letters off). None when all were read.
pub(crate) fn ignored_arguments(
    arguments: &Map<String, Value>,
    known: &[&str],
    read: &BTreeSet<&'static str>,
) -> Option<String> {
    let candidates: BTreeSet<&str> = known.iter().copied().chain(read.iter().copied()).collect();
    let notes: Vec<String> = arguments
        .keys()
        .filter(|key| !candidates.contains(key.as_str()))
        .map(|key| match closest(key, &candidates) {
            Some(meant) => format!("ignored argument `{key}` (did you mean `{meant}`?)"),
            None => format!("ignored argument `{key}` (this tool does not read it)"),
        })
        .collect();
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// The candidate closest to `key`: the same but for case and `_`, else within
/// [`MAX_SUGGESTION_DISTANCE`] edits (of a name longer than that).
fn closest<'c>(key: &str, candidates: &BTreeSet<&'c str>) -> Option<&'c str> {
    let folded = |s: &str| s.replace('_', "").to_lowercase();
    let key_folded = folded(key);
    if let Some(same) = candidates.iter().find(|c| folded(c) == key_folded) {
        return Some(same);
    }
    candidates
        .iter()
        .filter(|c| c.chars().count() > MAX_SUGGESTION_DISTANCE)
        .map(|c| (edit_distance(&key_folded, &folded(c)), *c))
        .filter(|(distance, _)| *distance <= MAX_SUGGESTION_DISTANCE)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, c)| c)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// Collects typed values from one call's arguments and the problems met on the way.
pub(crate) struct Args<'a> {
    raw: &'a Map<String, Value>,
    problems: Vec<String>,
}

/// Short description of a JSON value for an error message, naming strings' content.
pub(crate) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => {
            let shown: String = s.chars().take(40).collect();
            let more = if shown.len() < s.len() { "…" } else { "" };
            format!("string {:?}", format!("{shown}{more}"))
        }
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
    }
}

impl<'a> Args<'a> {
    pub(crate) fn new(raw: &'a Map<String, Value>) -> Self {
        Args {
            raw,
            problems: Vec::new(),
        }
    }

    /// Records a problem with a field.
    pub(crate) fn problem(&mut self, field: &str, message: impl std::fmt::Display) {
        self.problems.push(format!("{field}: {message}"));
    }

    /// The problems met so far, each `field: message`.
    pub(crate) fn into_problems(self) -> Vec<String> {
        self.problems
    }

    pub(crate) fn has_problems(&self) -> bool {
        !self.problems.is_empty()
    }

    /// The first of `names` present in the arguments, with its value.
    fn lookup(&self, names: &[&'static str]) -> Option<(&'static str, &'a Value)> {
        note_read(names);
        names
            .iter()
            .find_map(|name| self.raw.get(*name).map(|value| (*name, value)))
    }

    fn missing(&mut self, names: &[&'static str], expected: &str) {
        let field = names[0];
        let near = match self.misspelt(names, &[]) {
            Some(given) => format!(" (`{given}` was given: did you mean `{field}`?)"),
            None => String::new(),
        };
        self.problem(
            field,
            format!("Invalid input: expected {expected}, received undefined{near}"),
        );
    }

    /// A key of the arguments that is none of `names` nor of the tool's own argument
    /// names (`known`) but close to one of `names` (case, `_`, or a couple of letters
    /// off): the name meant, misspelt. A missing field with one is never given a default.
    pub(crate) fn misspelt(&self, names: &[&'static str], known: &[String]) -> Option<&'a str> {
        let wanted: BTreeSet<&str> = names.iter().copied().collect();
        self.raw
            .keys()
            .filter(|key| !wanted.contains(key.as_str()) && !known.contains(key))
            .find(|key| closest(key, &wanted).is_some())
            .map(String::as_str)
    }

    /// A string field. `names[0]` is the canonical name, the rest accepted spellings.
    pub(crate) fn string(&mut self, names: &[&'static str], required: bool) -> Option<String> {
        self.string_limited(names, required, MAX_TEXT_BYTES)
    }

    /// A string field of at most `max_bytes` bytes.
    pub(crate) fn string_limited(
        &mut self,
        names: &[&'static str],
        required: bool,
        max_bytes: usize,
    ) -> Option<String> {
        match self.lookup(names) {
            None => {
                if required {
                    self.missing(names, "string");
                }
                None
            }
            Some((field, Value::String(text))) => {
                if text.len() > max_bytes {
                    self.problem(
                        field,
                        format!(
                            "Too big: expected string to have <={max_bytes} bytes, received {} bytes; split the text into several calls",
                            text.len()
                        ),
                    );
                    return None;
                }
                Some(text.clone())
            }
            Some((field, other)) => {
                self.problem(
                    field,
                    format!(
                        "Invalid input: expected string, received {}",
                        describe(other)
                    ),
                );
                None
            }
        }
    }

    /// A boolean: JSON true/false, or the strings "true"/"false" in any case.
    pub(crate) fn boolean(&mut self, names: &[&'static str], required: bool) -> Option<bool> {
        match self.lookup(names) {
            None => {
                if required {
                    self.missing(names, "boolean");
                }
                None
            }
            Some((_, Value::Bool(b))) => Some(*b),
            Some((field, Value::String(text))) => match parse_bool_text(text) {
                Some(b) => Some(b),
                None => {
                    self.problem(
                        field,
                        format!(
                            "Invalid input: expected boolean, received {} (use true or false)",
                            describe(&Value::String(text.clone()))
                        ),
                    );
                    None
                }
            },
            Some((field, other)) => {
                self.problem(
                    field,
                    format!(
                        "Invalid input: expected boolean, received {} (use true or false)",
                        describe(other)
                    ),
                );
                None
            }
        }
    }

    /// An integer ≥ `min`: a JSON integer, or a string holding a decimal integer
    /// (surrounding spaces allowed).
    pub(crate) fn integer(
        &mut self,
        names: &[&'static str],
        required: bool,
        min: u64,
    ) -> Option<u64> {
        let (field, value) = match self.lookup(names) {
            None => {
                if required {
                    self.missing(names, "number");
                }
                return None;
            }
            Some(found) => found,
        };
        // Only a refused value needs the message (this runs for every integer argument).
        let too_small = || format!("Too small: expected number to be >={min}");
        let parsed: Result<i128, String> = match value {
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Ok(i as i128)
                } else if let Some(u) = n.as_u64() {
                    Ok(u as i128)
                } else {
                    let f = n.as_f64().unwrap_or(f64::NAN);
                    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e30 {
                        Ok(f as i128)
                    } else {
                        Err(format!("Invalid input: expected int, received number {n}"))
                    }
                }
            }
            Value::Null => Err(format!("{}, received null", too_small())),
            Value::String(text) => {
                let trimmed = text.trim();
                if trimmed.is_empty() {
                    Err(format!("{}, received an empty string", too_small()))
                } else if let Some(i) = parse_decimal(trimmed) {
                    Ok(i)
                } else if trimmed.parse::<f64>().is_ok_and(|f| f.is_finite()) {
                    Err(format!(
                        "Invalid input: expected int, received {}",
                        describe(value)
                    ))
                } else {
                    Err(format!(
                        "Invalid input: expected number, received {}",
                        describe(value)
                    ))
                }
            }
            other => Err(format!(
                "Invalid input: expected number, received {}",
                describe(other)
            )),
        };
        match parsed {
            Ok(i) if i < min as i128 => {
                self.problem(field, format!("{}, received {i}", too_small()));
                None
            }
            Ok(i) if i > MAX_INTEGER as i128 => {
                self.problem(
                    field,
                    format!("Too big: expected number to be <={MAX_INTEGER}, received {i}"),
                );
                None
            }
            Ok(i) => Some(i as u64),
            Err(message) => {
                self.problem(field, message);
                None
            }
        }
    }

    /// A list of strings: a JSON array of strings, or one string of comma-separated items.
    pub(crate) fn string_list(&mut self, names: &[&'static str]) -> Option<Vec<String>> {
        match self.lookup(names)? {
            (_, Value::String(text)) => Some(
                text.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
            ),
            (field, Value::Array(items)) => {
                let mut out = Vec::new();
                for item in items {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        other => {
                            self.problem(
                                field,
                                format!(
                                    "Invalid input: expected array of strings, found {}",
                                    describe(other)
                                ),
                            );
                            return None;
                        }
                    }
                }
                Some(out)
            }
            (field, other) => {
                self.problem(
                    field,
                    format!(
                        "Invalid input: expected array of strings, received {}",
                        describe(other)
                    ),
                );
                None
            }
        }
    }
}

/// "true"/"false" in any case, nothing else.
fn parse_bool_text(text: &str) -> Option<bool> {
    if text.eq_ignore_ascii_case("true") {
        Some(true)
    } else if text.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// An optional sign followed by ASCII digits only (no exponent, no hex, no fraction).
fn parse_decimal(text: &str) -> Option<i128> {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || digits.len() > 30 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i128>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with(value: Value) -> Map<String, Value> {
        let mut map = Map::new();
        map.insert("f".into(), value);
        map
    }

    #[test]
    fn false_string_is_never_true() {
        for text in ["false", "FALSE", "False"] {
            let raw = with(json!(text));
            assert_eq!(Args::new(&raw).boolean(&["f"], true), Some(false));
        }
        for bad in [
            json!("yes"),
            json!(""),
            json!("1"),
            json!(1),
            json!(0),
            json!(null),
        ] {
            let raw = with(bad);
            let mut args = Args::new(&raw);
            assert_eq!(args.boolean(&["f"], true), None);
            assert!(args.has_problems());
        }
    }

    /// The schema fragments and the parser agree: whatever the parser reads validates,
    /// and whatever it refuses fails the fragment, except the documented gaps (strings,
    /// numbers past MAX_INTEGER).
    #[test]
    fn schema_fragments_declare_what_the_parser_reads() {
        let boolean = jsonschema::draft202012::new(&boolean_schema()).unwrap();
        let count = jsonschema::draft202012::new(&count_schema()).unwrap();
        let page = jsonschema::draft202012::new(&count_schema_up_to(200)).unwrap();
        let list = jsonschema::draft202012::new(&string_list_schema()).unwrap();
        let samples = [
            json!(true),
            json!(false),
            json!("TRUE"),
            json!("false"),
            json!("yes"),
            json!(""),
            json!(-1),
            json!(0),
            json!(1),
            json!(2.0),
            json!(2.5),
            json!(-0.0),
            json!(200),
            json!(201),
            json!(MAX_INTEGER),
            json!(MAX_INTEGER + 1),
            json!(1e300),
            json!(" 7 "),
            json!("+07"),
            json!("0"),
            json!("1e3"),
            json!(null),
            json!([]),
            json!(["a"]),
            json!([1]),
            json!({}),
            json!("a,b"),
        ];
        for sample in samples {
            let raw = with(sample.clone());
            // Left to words (see the module's schema notes): a count below 1, a list's
            // items that are not strings.
            let gap = |what: &str, schema_valid: bool, read: bool| {
                !read
                    && schema_valid
                    && (sample.is_string()
                        || sample.as_f64().is_some_and(|n| n > MAX_INTEGER as f64)
                        || (matches!(what, "count" | "page")
                            && sample.as_f64().is_some_and(|n| n < 1.0))
                        || (what == "list" && sample.is_array()))
            };
            let checks = [
                (
                    "boolean",
                    boolean.is_valid(&sample),
                    Args::new(&raw).boolean(&["f"], true).is_some(),
                ),
                (
                    "count",
                    count.is_valid(&sample),
                    Args::new(&raw).integer(&["f"], true, 1).is_some(),
                ),
                ("page", page.is_valid(&sample), {
                    Args::new(&raw)
                        .integer(&["f"], true, 1)
                        .is_some_and(|n| n <= 200)
                }),
                (
                    "list",
                    list.is_valid(&sample),
                    Args::new(&raw).string_list(&["f"]).is_some(),
                ),
            ];
            for (what, schema_valid, read) in checks {
                assert!(
                    schema_valid == read || gap(what, schema_valid, read),
                    "{what} {sample}: schema says {schema_valid}, parser reads it: {read}"
                );
            }
        }
    }

    #[test]
    fn integers_accept_decimal_strings_only() {
        for (value, expected) in [
            (json!(5), Some(5)),
            (json!(" 5 "), Some(5)),
            (json!("2"), Some(2)),
            (json!(3.0), Some(3)),
            (json!("1e3"), None),
            (json!("0x10"), None),
            (json!(1.5), None),
            (json!("abc"), None),
            (json!(""), None),
            (json!(null), None),
            (json!(0), None),
            (json!(-1), None),
            (json!(1e300), None),
            (json!("99999999999999999999999"), None),
        ] {
            let raw = with(value.clone());
            assert_eq!(
                Args::new(&raw).integer(&["f"], true, 1),
                expected,
                "{value}"
            );
        }
    }
}
