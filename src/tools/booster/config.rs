//! A booster session's configuration: the spec's defaults, our limits, and how a
//! client's `config` object is read (numbers and booleans may come as strings).
//!
//! Owns: [`Config`] (recorded whole in `booster_started`, so a session keeps the config
//! it ran with) and [`parse_config`]. Must not: read the environment (whether a model
//! exists is decided per call, [`Config::use_sampling`] only says whether one may be
//! asked).

use crate::tools::args::describe;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Most candidates one iteration may ask for.
pub(crate) const MAX_CANDIDATES: u64 = 16;
/// Most iterations one session may run (`maxSteps` can be raised up to this).
pub(crate) const MAX_STEPS_LIMIT: u64 = 64;
/// Widest beam.
pub(crate) const MAX_BEAM_WIDTH: u64 = 4;
/// Deepest beam.
pub(crate) const MAX_BEAM_DEPTH: u64 = 4;
/// Most model calls `llmMaxCalls` may allow in one session.
pub(crate) const MAX_LLM_CALLS: u64 = 256;
/// Most tokens a model may be asked for per call.
pub(crate) const MAX_SAMPLING_TOKENS: u64 = 32_000;
/// Largest absolute weight or `minImprovement`.
pub(crate) const MAX_WEIGHT: f64 = 100.0;

/// A session's configuration (camelCase as the spec names it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Config {
    pub num_candidates: u64,
    pub top_m: u64,
    pub allow_backtrack: bool,
    pub w_rules: f64,
    pub w_redundancy: f64,
    pub w_consistency: f64,
    /// Whether a model may be asked (configured HTTP provider or the client's sampling);
    /// `None`: yes when one exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_sampling: Option<bool>,
    pub sampling_max_tokens: u64,
    pub min_improvement: f64,
    pub beam_width: u64,
    pub beam_depth: u64,
    pub llm_max_calls: u64,
    pub max_steps: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            num_candidates: 5,
            top_m: 2,
            allow_backtrack: true,
            w_rules: 0.6,
            w_redundancy: 0.25,
            w_consistency: 0.15,
            use_sampling: None,
            sampling_max_tokens: 2000,
            min_improvement: 0.01,
            beam_width: 1,
            beam_depth: 2,
            llm_max_calls: 8,
            max_steps: 16,
        }
    }
}

/// The keys a `config` object may have.
pub(crate) const CONFIG_KEYS: [&str; 13] = [
    "numCandidates",
    "topM",
    "allowBacktrack",
    "wRules",
    "wRedundancy",
    "wConsistency",
    "useSampling",
    "samplingMaxTokens",
    "minImprovement",
    "beamWidth",
    "beamDepth",
    "llmMaxCalls",
    "maxSteps",
];

fn integer(value: &Value, min: u64, max: u64) -> Result<u64, String> {
    let parsed = match value {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1e15)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    match parsed {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        Some(n) => Err(format!(
            "expected an integer from {min} to {max}, received {n}"
        )),
        None => Err(format!(
            "expected an integer from {min} to {max}, received {}",
            describe(value)
        )),
    }
}

fn number(value: &Value) -> Result<f64, String> {
    let parsed = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    match parsed {
        Some(f) if f.is_finite() && f.abs() <= MAX_WEIGHT => Ok(f),
        _ => Err(format!(
            "expected a number from -{MAX_WEIGHT} to {MAX_WEIGHT}, received {}",
            describe(value)
        )),
    }
}

fn boolean(value: &Value) -> Result<bool, String> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s.trim().eq_ignore_ascii_case("true") => Ok(true),
        Value::String(s) if s.trim().eq_ignore_ascii_case("false") => Ok(false),
        other => Err(format!(
            "expected boolean, received {} (use true or false)",
            describe(other)
        )),
    }
}

/// Reads a client's `config` (an object, or a JSON string of one) over the defaults.
/// Every problem is returned, each `config.<key>: message`.
pub(crate) fn parse_config(value: Option<&Value>) -> Result<Config, Vec<String>> {
    let mut config = Config::default();
    let owned;
    let map: &Map<String, Value> = match value {
        None => return Ok(config),
        Some(Value::Object(map)) => map,
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => {
                owned = map;
                &owned
            }
            _ => {
                return Err(vec![
                    "config: expected an object such as {\"numCandidates\": 5}, received a string that is not one".into(),
                ]);
            }
        },
        Some(other) => {
            return Err(vec![format!(
                "config: expected an object such as {{\"numCandidates\": 5}}, received {}",
                describe(other)
            )]);
        }
    };
    let mut problems = Vec::new();
    for (key, value) in map {
        let result: Result<(), String> = match key.as_str() {
            "numCandidates" => integer(value, 1, MAX_CANDIDATES).map(|v| config.num_candidates = v),
            "topM" => integer(value, 1, MAX_CANDIDATES).map(|v| config.top_m = v),
            "allowBacktrack" => boolean(value).map(|v| config.allow_backtrack = v),
            "wRules" => number(value).map(|v| config.w_rules = v),
            "wRedundancy" => number(value).map(|v| config.w_redundancy = v),
            "wConsistency" => number(value).map(|v| config.w_consistency = v),
            "useSampling" => boolean(value).map(|v| config.use_sampling = Some(v)),
            "samplingMaxTokens" => {
                integer(value, 1, MAX_SAMPLING_TOKENS).map(|v| config.sampling_max_tokens = v)
            }
            "minImprovement" => number(value).map(|v| config.min_improvement = v),
            "beamWidth" => integer(value, 1, MAX_BEAM_WIDTH).map(|v| config.beam_width = v),
            "beamDepth" => integer(value, 1, MAX_BEAM_DEPTH).map(|v| config.beam_depth = v),
            "llmMaxCalls" => integer(value, 0, MAX_LLM_CALLS).map(|v| config.llm_max_calls = v),
            "maxSteps" => integer(value, 1, MAX_STEPS_LIMIT).map(|v| config.max_steps = v),
            other => Err(format!(
                "unknown key {other:?}; config takes {}",
                CONFIG_KEYS.join(", ")
            )),
        };
        if let Err(message) = result {
            problems.push(format!("config.{key}: {message}"));
        }
    }
    if config.top_m > config.num_candidates {
        problems.push(format!(
            "config.topM: {} is more than numCandidates {}; use at most numCandidates",
            config.top_m, config.num_candidates
        ));
    }
    if problems.is_empty() {
        Ok(config)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_strings_and_refusals() {
        assert_eq!(parse_config(None).unwrap(), Config::default());
        let config = parse_config(Some(
            &json!({"numCandidates": "7", "allowBacktrack": "false", "wRules": "0.5"}),
        ))
        .unwrap();
        assert_eq!(config.num_candidates, 7);
        assert!(!config.allow_backtrack);
        assert_eq!(config.w_rules, 0.5);
        let from_text = parse_config(Some(&json!("{\"beamWidth\": 2}"))).unwrap();
        assert_eq!(from_text.beam_width, 2);
        let problems = parse_config(Some(
            &json!({"numCandidates": 0, "allowBacktrack": "yes", "bogus": 1, "maxSteps": 1000}),
        ))
        .unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("config.bogus: unknown key"))
        );
        let problems = parse_config(Some(&json!({"topM": 6}))).unwrap_err();
        assert!(
            problems[0].contains("more than numCandidates"),
            "{problems:?}"
        );
        assert!(parse_config(Some(&json!([1]))).is_err());
        let json = serde_json::to_value(Config::default()).unwrap();
        assert_eq!(json["numCandidates"], 5);
        assert!(json.get("useSampling").is_none());
    }
}
