//! The OpenAI-compatible embeddings client: `POST {base_url}/embeddings` with a batch of
//! texts, one vector per text back (Ollama, llama.cpp's `llama-server --embeddings`,
//! OpenAI and vLLM all speak it).
//!
//! Owns: [`EmbeddingsConfig`] (from `REASONING_LEDGER_EMBEDDINGS_BASE_URL` / `_MODEL` /
//! `_API_KEY`, else the `"embeddings"` entry of `providers.json`; variables read as the
//! chat provider's are, environment first, then the secrets files), [`EmbeddingsClient`]
//! (a reqwest client with a per-attempt timeout; retries on 429 and 5xx with the chat
//! client's backoff and jitter, a `Retry-After` honoured up to
//! [`super::http::MAX_RETRY_AFTER`]) and [`EmbeddingsError`]. Must not: put the key
//! anywhere but the `Authorization` header, or let a response body out unredacted (every
//! message goes through [`super::redact::redact`] with the key known).

use super::config::{ApiKey, CONFIG_FILE, EMBEDDINGS_ENTRY, MAX_RETRIES, Variables, trim_base};
use super::http::{
    BACKOFF_JITTER, MAX_RETRY_AFTER, classify, error_chain, json_post, parse_seconds, read_limited,
};
use super::redact::redact;
use serde::Deserialize;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// Base URL of an OpenAI-compatible embeddings endpoint (without `/embeddings`).
pub(crate) const EMBEDDINGS_BASE_URL_ENV: &str = "REASONING_LEDGER_EMBEDDINGS_BASE_URL";
/// The embedding model's name (also what vectors are keyed by: a new name re-embeds).
pub(crate) const EMBEDDINGS_MODEL_ENV: &str = "REASONING_LEDGER_EMBEDDINGS_MODEL";
/// The endpoint's key (optional for local servers).
pub(crate) const EMBEDDINGS_API_KEY_ENV: &str = "REASONING_LEDGER_EMBEDDINGS_API_KEY";
/// First backoff delay in milliseconds (tests and slow links), of retries and of the
/// background embedder after a failure.
pub(crate) const EMBEDDINGS_BACKOFF_ENV: &str = "REASONING_LEDGER_EMBEDDINGS_BACKOFF_MS";

/// Default timeout of one attempt (a batch of [`MAX_BATCH_TEXTS`] texts on a small local
/// model takes a few seconds; a hung endpoint is given up on within this, so events are
/// embedded within about this plus a retry of its return).
pub(crate) const DEFAULT_EMBEDDINGS_TIMEOUT: Duration = Duration::from_secs(15);
/// Default first backoff delay.
pub(crate) const DEFAULT_EMBEDDINGS_BACKOFF: Duration = Duration::from_secs(1);
/// Most texts sent in one request.
pub(crate) const MAX_BATCH_TEXTS: usize = 32;
/// Longest text sent, in characters (small embedding models read about 512 tokens; the
/// rest of a longer text is cut).
pub(crate) const MAX_INPUT_CHARS: usize = 2_000;
/// Longest vector accepted.
pub(crate) const MAX_DIMENSIONS: usize = 8_192;

/// One embeddings endpoint.
#[derive(Clone, Debug)]
pub(crate) struct EmbeddingsConfig {
    /// "custom" (the environment) or the config entry's name.
    pub name: String,
    /// Without a trailing slash; requests go to `{base_url}/embeddings`.
    pub base_url: String,
    pub model: String,
    pub api_key: Option<ApiKey>,
    /// Per attempt.
    pub timeout: Duration,
    /// First backoff delay.
    pub backoff: Duration,
    pub max_retries: u32,
}

/// The config entry's shape.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigEntry {
    #[serde(default)]
    name: Option<String>,
    base_url: String,
    model: String,
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    timeout_secs: Option<f64>,
    #[serde(default)]
    max_retries: Option<u32>,
}

impl EmbeddingsConfig {
    /// The endpoint configured for `data_dir` (environment, secrets files, then
    /// `providers.json`); `Ok(None)` when none is, `Err` says what is wrong with a
    /// setting (the caller logs it and runs without embeddings).
    pub(crate) fn load(data_dir: Option<&Path>) -> Result<Option<Self>, String> {
        let vars = Variables::load(data_dir);
        let file = data_dir.map(|dir| dir.join(CONFIG_FILE));
        Self::from_sources(&vars, file.as_deref())
    }

    /// The endpoint of `vars` and the config file at `file`, if it exists.
    pub(crate) fn from_sources(
        vars: &Variables,
        file: Option<&Path>,
    ) -> Result<Option<Self>, String> {
        let backoff = vars
            .get(EMBEDDINGS_BACKOFF_ENV)
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or(DEFAULT_EMBEDDINGS_BACKOFF, Duration::from_millis);
        let make = |name: &str, base: &str, model: &str, key: Option<&str>| EmbeddingsConfig {
            name: name.to_string(),
            base_url: trim_base(base),
            model: model.trim().to_string(),
            api_key: key.map(ApiKey::new),
            timeout: DEFAULT_EMBEDDINGS_TIMEOUT,
            backoff,
            max_retries: MAX_RETRIES,
        };
        if let Some(base) = vars.get(EMBEDDINGS_BASE_URL_ENV) {
            return match vars.get(EMBEDDINGS_MODEL_ENV) {
                Some(model) => Ok(Some(make(
                    "custom",
                    base,
                    model,
                    vars.get(EMBEDDINGS_API_KEY_ENV),
                ))),
                None => Err(format!(
                    "{EMBEDDINGS_BASE_URL_ENV} is set but {EMBEDDINGS_MODEL_ENV} is not: set both"
                )),
            };
        }
        let Some(path) = file.filter(|p| p.exists()) else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(&text) else {
            return Ok(None); // the chat provider's reading reports a broken file
        };
        let Some(entry) = object.remove(EMBEDDINGS_ENTRY) else {
            return Ok(None);
        };
        let entry: ConfigEntry = serde_json::from_value(entry).map_err(|e| {
            format!(
                "{}: the {EMBEDDINGS_ENTRY:?} entry could not be read: {} (fields: base_url, model, api_key_env or api_key, name, timeout_secs, max_retries)",
                path.display(),
                redact(&e.to_string(), &[])
            )
        })?;
        let key = entry.api_key.clone().or_else(|| {
            entry
                .api_key_env
                .as_deref()
                .and_then(|name| vars.get(name))
                .map(str::to_string)
        });
        let mut config = make(
            entry.name.as_deref().unwrap_or("custom"),
            &entry.base_url,
            &entry.model,
            key.as_deref(),
        );
        if let Some(secs) = entry.timeout_secs.filter(|s| s.is_finite() && *s > 0.0) {
            config.timeout = Duration::from_secs_f64(secs);
        }
        if let Some(retries) = entry.max_retries {
            config.max_retries = retries.min(MAX_RETRIES);
        }
        Ok(Some(config))
    }
}

/// Why an embeddings call failed. Every message is already redacted of key-like text.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub(crate) enum EmbeddingsError {
    /// No answer (refused, reset, unreachable, timeout).
    #[error("the embeddings endpoint {provider} did not answer: {message}")]
    Network { provider: String, message: String },
    /// An HTTP error status.
    #[error("the embeddings endpoint {provider} answered HTTP {status}: {message}")]
    Api {
        provider: String,
        status: u16,
        message: String,
        retry_after_ms: Option<u64>,
    },
    /// A success status with a body that is not embeddings.
    #[error(
        "the embeddings endpoint {provider} answered with a body that is not embeddings: {message}"
    )]
    BadResponse { provider: String, message: String },
}

impl EmbeddingsError {
    fn retryable(&self) -> bool {
        matches!(self, EmbeddingsError::Api { status, .. } if *status == 429 || (500..=599).contains(status))
    }
}

/// An OpenAI-compatible embeddings endpoint.
#[derive(Debug)]
pub(crate) struct EmbeddingsClient {
    config: EmbeddingsConfig,
    client: reqwest::Client,
}

impl EmbeddingsClient {
    pub(crate) fn new(config: EmbeddingsConfig) -> Self {
        let client = super::http::client(config.timeout, Duration::from_secs(10));
        EmbeddingsClient { config, client }
    }

    pub(crate) fn config(&self) -> &EmbeddingsConfig {
        &self.config
    }

    fn clean(&self, text: &str) -> String {
        let keys: Vec<&str> = self.config.api_key.iter().map(|k| k.expose()).collect();
        redact(text, &keys)
    }

    /// One vector per text, in order (at most [`MAX_BATCH_TEXTS`] texts; each cut to
    /// [`MAX_INPUT_CHARS`]); retried on 429 and 5xx.
    pub(crate) async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        self.embed_retrying(texts, self.config.max_retries).await
    }

    /// [`EmbeddingsClient::embed`] with no retry (a search's query: it answers lexically
    /// at once rather than wait out a backoff).
    pub(crate) async fn embed_once(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        self.embed_retrying(texts, 0).await
    }

    async fn embed_retrying(
        &self,
        texts: &[String],
        max_retries: u32,
    ) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let input: Vec<String> = texts
            .iter()
            .map(|t| {
                let cut: String = t.chars().take(MAX_INPUT_CHARS).collect();
                if cut.trim().is_empty() {
                    " ".to_string()
                } else {
                    cut
                }
            })
            .collect();
        let body = json!({"model": self.config.model, "input": input});
        let mut retries = 0;
        loop {
            match self.attempt(&body, texts.len()).await {
                Ok(vectors) => return Ok(vectors),
                Err(error) if error.retryable() && retries < max_retries => {
                    retries += 1;
                    let wait = match &error {
                        EmbeddingsError::Api {
                            retry_after_ms: Some(ms),
                            ..
                        } if Duration::from_millis(*ms) > MAX_RETRY_AFTER => return Err(error),
                        EmbeddingsError::Api {
                            retry_after_ms: Some(ms),
                            ..
                        } => Duration::from_millis(*ms),
                        _ => backoff(self.config.backoff, retries),
                    };
                    tracing::warn!(
                        provider = %self.config.name,
                        wait_ms = wait.as_millis() as u64,
                        "embeddings call failed, retrying: {error}"
                    );
                    tokio::time::sleep(wait).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn attempt(&self, body: &Value, count: usize) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        let provider = self.config.name.clone();
        let url = format!("{}/embeddings", self.config.base_url);
        let request = json_post(&self.client, &url, body, self.config.api_key.as_ref());
        let network = |error: &reqwest::Error| {
            let text = format!("{:?}: {}", classify(error), error_chain(error));
            EmbeddingsError::Network {
                provider: provider.clone(),
                message: self.clean(&text),
            }
        };
        let response = request.send().await.map_err(|e| network(&e))?;
        let status = response.status().as_u16();
        if let Some(message) = super::http::redirect_message(&response) {
            return Err(EmbeddingsError::Api {
                provider,
                status,
                message: self.clean(&message),
                retry_after_ms: None,
            });
        }
        let retry_after_ms = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_seconds);
        let bytes = read_limited(response).await.map_err(|e| network(&e))?;
        if !(200..300).contains(&status) {
            let text = String::from_utf8_lossy(&bytes);
            let message: String = self
                .clean(&text)
                .chars()
                .take(super::http::ERROR_BODY_MAX_CHARS)
                .collect();
            return Err(EmbeddingsError::Api {
                provider,
                status,
                message,
                retry_after_ms,
            });
        }
        parse_embeddings(&bytes, count).map_err(|message| EmbeddingsError::BadResponse {
            provider,
            message: self.clean(&message),
        })
    }
}

/// The backoff before retry `retry` (1-based): about first × (2^retry − 1), with jitter.
pub(crate) fn backoff(first: Duration, retry: u32) -> Duration {
    let factor = (1u64 << retry.min(16)) - 1;
    let jitter = 1.0 - BACKOFF_JITTER + 2.0 * BACKOFF_JITTER * fastrand::f64();
    Duration::from_secs_f64(first.as_secs_f64() * factor as f64 * jitter)
}

/// The vectors of an embeddings answer (`data[].embedding`, ordered by `index`).
pub(crate) fn parse_embeddings(bytes: &[u8], count: usize) -> Result<Vec<Vec<f32>>, String> {
    #[derive(Deserialize)]
    struct Answer {
        data: Vec<Item>,
    }
    #[derive(Deserialize)]
    struct Item {
        #[serde(default)]
        index: Option<usize>,
        embedding: Vec<f32>,
    }
    let answer: Answer = serde_json::from_slice(bytes).map_err(|e| {
        let start: String = String::from_utf8_lossy(bytes).chars().take(120).collect();
        format!("not an embeddings answer ({e}); it starts with {start:?}")
    })?;
    if answer.data.len() != count {
        return Err(format!("{} vectors for {count} texts", answer.data.len()));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; count];
    for (at, item) in answer.data.into_iter().enumerate() {
        let index = item.index.unwrap_or(at);
        if index >= count || slots[index].is_some() {
            return Err(format!("vector index {index} out of place"));
        }
        if item.embedding.is_empty() || item.embedding.len() > MAX_DIMENSIONS {
            return Err(format!("a vector of {} dimensions", item.embedding.len()));
        }
        if item.embedding.iter().any(|x| !x.is_finite()) {
            return Err("a vector holds a value that is not a finite number".into());
        }
        slots[index] = Some(item.embedding);
    }
    let vectors: Vec<Vec<f32>> = slots.into_iter().flatten().collect();
    let dims = vectors[0].len();
    if vectors.iter().any(|v| v.len() != dims) {
        return Err("vectors of different lengths".into());
    }
    Ok(vectors)
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
    fn the_environment_then_the_config_entry() {
        assert!(
            EmbeddingsConfig::from_sources(&vars(&[]), None)
                .unwrap()
                .is_none()
        );
        let c = EmbeddingsConfig::from_sources(
            &vars(&[
                (EMBEDDINGS_BASE_URL_ENV, "http://127.0.0.1:9/v1/"),
                (EMBEDDINGS_MODEL_ENV, "bge"),
                (EMBEDDINGS_API_KEY_ENV, "sk-canary-embed-000"),
            ]),
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.base_url, "http://127.0.0.1:9/v1");
        assert!(!format!("{c:?}").contains("canary"));
        assert!(
            EmbeddingsConfig::from_sources(&vars(&[(EMBEDDINGS_BASE_URL_ENV, "http://x")]), None)
                .is_err()
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(CONFIG_FILE);
        std::fs::write(
            &path,
            r#"{"embeddings":{"base_url":"http://localhost:11434/v1","model":"nomic","api_key_env":"EMB_KEY"}}"#,
        )
        .unwrap();
        let c = EmbeddingsConfig::from_sources(&vars(&[("EMB_KEY", "k-1")]), Some(&path))
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.model.as_str(), c.api_key.unwrap().expose()),
            ("nomic", "k-1")
        );
        // The chat provider's reading leaves the entry alone: no chat provider here.
        let chat = super::super::ProviderSettings::from_sources(&vars(&[]), Some(&path));
        assert!(chat.provider.is_none() && chat.problems.is_empty());
        std::fs::write(
            &path,
            r#"{"base_url":"http://chat/v1","model":"c","embeddings":{"base_url":"http://e/v1","model":"e"}}"#,
        )
        .unwrap();
        let chat = super::super::ProviderSettings::from_sources(&vars(&[]), Some(&path));
        assert_eq!(chat.provider.unwrap().model, "c");
    }

    #[test]
    fn answers_are_read_in_index_order() {
        let body =
            br#"{"data":[{"index":1,"embedding":[0.0,1.0]},{"index":0,"embedding":[1.0,0.0]}]}"#;
        let v = parse_embeddings(body, 2).unwrap();
        assert_eq!(v, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert!(parse_embeddings(body, 3).is_err());
        assert!(parse_embeddings(b"<html>", 1).is_err());
        assert!(
            parse_embeddings(
                br#"{"data":[{"embedding":[1.0]},{"embedding":[1.0,2.0]}]}"#,
                2
            )
            .is_err()
        );
    }
}
