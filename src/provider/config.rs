//! Which HTTP provider a process uses, from the environment, the secrets files and a
//! config file in the data directory.
//!
//! Order (the first that is set wins): the generic triple `REASONING_LEDGER_LLM_BASE_URL`
//! / `_MODEL` / `_API_KEY` (any OpenAI-compatible server, local ones included; the key is
//! optional), then the config file `<data dir>/providers.json`, then the presets
//! DeepSeek, SiliconFlow, Cerebras and OpenAI from their `*_API_KEY` (with optional
//! `*_BASE_URL` and `*_MODEL`). Variables are read from the process environment, then
//! from `<data dir>/secrets.local.txt`, then `<data dir>/secrets.txt` (`KEY=VALUE` lines;
//! the environment wins). Must not: print, log or serialize a key ([`ApiKey`]).

use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

/// Name of the config file in the data directory.
pub(crate) const CONFIG_FILE: &str = "providers.json";
/// Secrets files read in the data directory, first wins (after the environment).
pub(crate) const SECRETS_FILES: [&str; 2] = ["secrets.local.txt", "secrets.txt"];

/// Generic OpenAI-compatible endpoint: base URL (without `/chat/completions`).
pub(crate) const LLM_BASE_URL_ENV: &str = "REASONING_LEDGER_LLM_BASE_URL";
/// Generic endpoint's model.
pub(crate) const LLM_MODEL_ENV: &str = "REASONING_LEDGER_LLM_MODEL";
/// Generic endpoint's key (optional for local servers).
pub(crate) const LLM_API_KEY_ENV: &str = "REASONING_LEDGER_LLM_API_KEY";
/// Request timeout in seconds (any provider).
pub(crate) const LLM_TIMEOUT_ENV: &str = "REASONING_LEDGER_LLM_TIMEOUT_SECS";
/// First backoff delay in milliseconds (later ones: ×3, ×7), for tests and slow links.
pub(crate) const LLM_BACKOFF_ENV: &str = "REASONING_LEDGER_LLM_BACKOFF_MS";
/// Longest wait for a client to answer a sampling request, in seconds.
pub(crate) const SAMPLING_TIMEOUT_ENV: &str = "REASONING_LEDGER_SAMPLING_TIMEOUT_SECS";

/// Default request timeout of one HTTP attempt.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default first backoff delay (then about 3 s and 7 s, with jitter).
pub(crate) const DEFAULT_BACKOFF: Duration = Duration::from_secs(1);
/// Retries after the first attempt, on 429 and 5xx only.
pub(crate) const MAX_RETRIES: u32 = 3;

/// The presets: name, variable prefix, default base URL, default model.
pub(crate) const PRESETS: [(&str, &str, &str, &str); 4] = [
    (
        "deepseek",
        "DEEPSEEK",
        "https://api.deepseek.com",
        "deepseek-v4-pro",
    ),
    (
        "siliconflow",
        "SILICONFLOW",
        "https://api.siliconflow.cn/v1",
        "deepseek-ai/DeepSeek-V4-Flash",
    ),
    (
        "cerebras",
        "CEREBRAS",
        "https://api.cerebras.ai/v1",
        "qwen-3-235b-a22b-thinking-2507",
    ),
    (
        "openai",
        "OPENAI",
        "https://api.openai.com/v1",
        "gpt-4o-mini",
    ),
];

/// A secret: never serialized, never printed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ApiKey(String);

impl ApiKey {
    pub(crate) fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// The key itself, for the `Authorization` header and for redaction only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// Prices per million tokens, for the cost of a call (none configured: no cost).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct Prices {
    pub input_per_million: f64,
    pub output_per_million: f64,
    /// Cached prompt tokens, when the provider bills them apart.
    #[serde(default)]
    pub cached_input_per_million: Option<f64>,
}

impl Prices {
    /// Cost in US dollars (or whatever currency the table is in) of `usage`.
    pub(crate) fn cost(&self, usage: &super::Usage) -> f64 {
        let cached = usage
            .cached_prompt_tokens
            .unwrap_or(0)
            .min(usage.prompt_tokens);
        let (fresh, cached_price) = match self.cached_input_per_million {
            Some(price) => (usage.prompt_tokens - cached, price),
            None => (usage.prompt_tokens, 0.0),
        };
        let cached_part = if self.cached_input_per_million.is_some() {
            cached as f64 * cached_price
        } else {
            0.0
        };
        (fresh as f64 * self.input_per_million
            + cached_part
            + usage.completion_tokens as f64 * self.output_per_million)
            / 1_000_000.0
    }
}

/// One HTTP provider.
#[derive(Clone, Debug)]
pub(crate) struct ProviderConfig {
    /// "deepseek", "siliconflow", "cerebras", "openai", "custom" or the config file's name.
    pub name: String,
    /// Without a trailing slash; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// Per attempt.
    pub timeout: Duration,
    /// First backoff delay.
    pub backoff: Duration,
    pub max_retries: u32,
    pub prices: Option<Prices>,
    /// DeepSeek's thinking switch (`thinking: {type: "enabled"}`).
    pub thinking: bool,
}

/// Everything the provider layer reads at start.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProviderSettings {
    pub provider: Option<ProviderConfig>,
    pub sampling_timeout: Option<Duration>,
    /// Problems found while reading (a broken config file): said in the `config` error.
    pub problems: Vec<String>,
}

/// The config file's shape.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    name: Option<String>,
    base_url: String,
    model: String,
    /// The key itself (prefer `api_key_env`).
    #[serde(default)]
    api_key: Option<String>,
    /// A variable (environment or secrets file) holding the key.
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    timeout_secs: Option<f64>,
    #[serde(default)]
    max_retries: Option<u32>,
    #[serde(default)]
    prices: Option<Prices>,
    #[serde(default)]
    thinking: bool,
}

/// The `providers.json` entry naming the embeddings endpoint (`base_url`, `model`,
/// `api_key_env` or `api_key`, `name`, `timeout_secs`, `max_retries`), read by
/// [`super::embeddings`]; the chat provider's reading leaves it out.
pub(crate) const EMBEDDINGS_ENTRY: &str = "embeddings";

/// The chat provider of a config file's text; `None` when the file holds only an
/// `"embeddings"` entry (read by [`super::embeddings`]), which is left out here.
fn chat_entry(text: &str) -> Result<Option<ConfigFile>, String> {
    if let Ok(serde_json::Value::Object(mut object)) = serde_json::from_str(text)
        && object.remove(EMBEDDINGS_ENTRY).is_some()
    {
        if object.is_empty() {
            return Ok(None);
        }
        return serde_json::from_value(serde_json::Value::Object(object))
            .map(Some)
            .map_err(|e| e.to_string());
    }
    serde_json::from_str::<ConfigFile>(text)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Variables: the environment first, then the secrets files.
pub(crate) struct Variables {
    env: HashMap<String, String>,
    files: HashMap<String, String>,
}

impl Variables {
    /// The process environment and the secrets files of `data_dir`.
    pub(crate) fn load(data_dir: Option<&Path>) -> Self {
        let env = std::env::vars().collect();
        let mut files = HashMap::new();
        if let Some(dir) = data_dir {
            for name in SECRETS_FILES {
                let Ok(text) = std::fs::read_to_string(dir.join(name)) else {
                    continue;
                };
                for line in text.lines() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    let line = line.strip_prefix("export ").unwrap_or(line);
                    if let Some((key, value)) = line.split_once('=') {
                        let value = value.trim().trim_matches('"').trim_matches('\'');
                        files
                            .entry(key.trim().to_string())
                            .or_insert_with(|| value.to_string());
                    }
                }
            }
        }
        Variables { env, files }
    }

    /// From a map (tests).
    #[cfg(test)]
    pub(crate) fn from_map(env: HashMap<String, String>) -> Self {
        Variables {
            env,
            files: HashMap::new(),
        }
    }

    /// A non-empty value.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.env
            .get(name)
            .or_else(|| self.files.get(name))
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }
}

pub(crate) fn trim_base(url: &str) -> String {
    url.trim().trim_end_matches('/').to_string()
}

impl ProviderSettings {
    /// Settings from the environment, the secrets files and the config file of
    /// `data_dir` (see the module doc for the order).
    pub(crate) fn load(data_dir: Option<&Path>) -> Self {
        let vars = Variables::load(data_dir);
        let file = data_dir.map(|dir| dir.join(CONFIG_FILE));
        Self::from_sources(&vars, file.as_deref())
    }

    /// Settings from `vars` and the config file at `file`, if it exists.
    pub(crate) fn from_sources(vars: &Variables, file: Option<&Path>) -> Self {
        let mut settings = ProviderSettings::default();
        let seconds = |name: &str, settings: &mut ProviderSettings| -> Option<Duration> {
            let text = vars.get(name)?;
            match text.parse::<f64>() {
                Ok(s) if s.is_finite() && s > 0.0 => Some(Duration::from_secs_f64(s)),
                _ => {
                    settings.problems.push(format!(
                        "{name}={text:?} is not a positive number of seconds"
                    ));
                    None
                }
            }
        };
        let timeout = seconds(LLM_TIMEOUT_ENV, &mut settings);
        settings.sampling_timeout = seconds(SAMPLING_TIMEOUT_ENV, &mut settings);
        let backoff = vars
            .get(LLM_BACKOFF_ENV)
            .and_then(|ms| ms.parse::<u64>().ok())
            .map(Duration::from_millis);
        let make = |name: &str, base_url: &str, model: &str, key: Option<&str>| ProviderConfig {
            name: name.to_string(),
            base_url: trim_base(base_url),
            model: model.trim().to_string(),
            api_key: key.map(ApiKey::new),
            timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
            backoff: backoff.unwrap_or(DEFAULT_BACKOFF),
            max_retries: MAX_RETRIES,
            prices: None,
            thinking: false,
        };

        if let Some(base) = vars.get(LLM_BASE_URL_ENV) {
            match vars.get(LLM_MODEL_ENV) {
                Some(model) => {
                    settings.provider =
                        Some(make("custom", base, model, vars.get(LLM_API_KEY_ENV)));
                    return settings;
                }
                None => settings.problems.push(format!(
                    "{LLM_BASE_URL_ENV} is set but {LLM_MODEL_ENV} is not: set both"
                )),
            }
        }
        if let Some(path) = file
            && path.exists()
        {
            match std::fs::read_to_string(path)
                .map_err(|e| e.to_string())
                .and_then(|text| chat_entry(&text))
            {
                Ok(None) => {}
                Ok(Some(config)) => {
                    let key = config
                        .api_key
                        .clone()
                        .or_else(|| {
                            config
                                .api_key_env
                                .as_deref()
                                .and_then(|name| vars.get(name))
                                .map(str::to_string)
                        });
                    let mut provider = make(
                        config.name.as_deref().unwrap_or("custom"),
                        &config.base_url,
                        &config.model,
                        key.as_deref(),
                    );
                    if let Some(secs) = config.timeout_secs.filter(|s| s.is_finite() && *s > 0.0)
                    {
                        provider.timeout = Duration::from_secs_f64(secs);
                    }
                    if let Some(retries) = config.max_retries {
                        provider.max_retries = retries.min(MAX_RETRIES);
                    }
                    provider.prices = config.prices;
                    provider.thinking = config.thinking;
                    settings.provider = Some(provider);
                    return settings;
                }
                Err(error) => settings.problems.push(format!(
                    "{} could not be read: {} (fields: base_url, model, api_key_env or api_key, name, timeout_secs, max_retries, prices, thinking)",
                    path.display(),
                    super::redact::redact(&error, &[])
                )),
            }
        }
        for (name, prefix, base, model) in PRESETS {
            if let Some(key) = vars.get(&format!("{prefix}_API_KEY")) {
                let base = vars
                    .get(&format!("{prefix}_BASE_URL"))
                    .unwrap_or(base)
                    .to_string();
                let model = vars
                    .get(&format!("{prefix}_MODEL"))
                    .unwrap_or(model)
                    .to_string();
                settings.provider = Some(make(name, &base, &model, Some(key)));
                return settings;
            }
        }
        settings
    }

    /// The `config` error's message when no HTTP provider is configured.
    pub(crate) fn unconfigured_reason(&self) -> String {
        let mut text = format!(
            "No model provider is configured and the client offers no MCP sampling. Set {LLM_BASE_URL_ENV} and {LLM_MODEL_ENV} (and {LLM_API_KEY_ENV} if the server needs one) for any OpenAI-compatible server, or DEEPSEEK_API_KEY, SILICONFLOW_API_KEY, CEREBRAS_API_KEY or OPENAI_API_KEY, or write {CONFIG_FILE} in the data directory; then restart the server."
        );
        for problem in &self.problems {
            text.push(' ');
            text.push_str(problem);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Variables {
        Variables::from_map(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn the_generic_triple_wins_then_the_presets_in_order() {
        let s = ProviderSettings::from_sources(
            &vars(&[
                ("OPENAI_API_KEY", "sk-openai"),
                ("CEREBRAS_API_KEY", "csk-x"),
                (LLM_BASE_URL_ENV, "http://127.0.0.1:8080/v1/"),
                (LLM_MODEL_ENV, "local"),
            ]),
            None,
        );
        let p = s.provider.unwrap();
        assert_eq!(
            (p.name.as_str(), p.base_url.as_str(), p.model.as_str()),
            ("custom", "http://127.0.0.1:8080/v1", "local")
        );
        assert!(p.api_key.is_none());

        let s = ProviderSettings::from_sources(
            &vars(&[
                ("OPENAI_API_KEY", "sk-openai"),
                ("CEREBRAS_API_KEY", "csk-x"),
            ]),
            None,
        );
        let p = s.provider.unwrap();
        assert_eq!(p.name, "cerebras");
        assert_eq!(p.base_url, "https://api.cerebras.ai/v1");
        assert_eq!(format!("{:?}", p.api_key), "Some(ApiKey(***))");
        assert!(!format!("{p:?}").contains("csk-x"));
    }

    #[test]
    fn a_config_file_is_read_and_a_broken_one_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        std::fs::write(
            &path,
            r#"{"name":"mine","base_url":"http://localhost:11434/v1","model":"llama","api_key_env":"MY_KEY","prices":{"input_per_million":1.0,"output_per_million":2.0}}"#,
        )
        .unwrap();
        let s = ProviderSettings::from_sources(&vars(&[("MY_KEY", "k-123")]), Some(&path));
        let p = s.provider.unwrap();
        assert_eq!((p.name.as_str(), p.model.as_str()), ("mine", "llama"));
        assert_eq!(p.api_key.unwrap().expose(), "k-123");
        std::fs::write(&path, "{not json").unwrap();
        let s = ProviderSettings::from_sources(&vars(&[]), Some(&path));
        assert!(s.provider.is_none());
        assert!(
            s.unconfigured_reason().contains("could not be read"),
            "{}",
            s.unconfigured_reason()
        );
    }

    #[test]
    fn cost_counts_cached_tokens_at_their_price() {
        let prices = Prices {
            input_per_million: 1.0,
            output_per_million: 2.0,
            cached_input_per_million: Some(0.1),
        };
        let usage = super::super::Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 500_000,
            total_tokens: 1_500_000,
            cached_prompt_tokens: Some(500_000),
        };
        assert!((prices.cost(&usage) - (0.5 + 0.05 + 1.0)).abs() < 1e-9);
    }
}
