//! The OpenAI-compatible chat-completions client: one POST to
//! `{base_url}/chat/completions` per attempt, retried on 429 and 5xx only.
//!
//! Owns: [`HttpProvider`] (a reqwest client with rustls over the ring provider, its
//! per-attempt timeout, no redirect followed: a 3xx is an error naming it), the request body, the answer's parsing, the retry loop
//! (at most [`super::config::MAX_RETRIES`] retries, exponential backoff about 1 s, 3 s,
//! 7 s with ±25 % jitter, a `Retry-After` header or `error.retry_after` in the body
//! honoured up to [`MAX_RETRY_AFTER`]), the classification of failures
//! ([`super::ProviderError`]) and the attempt records. Must not: put the key anywhere but
//! the `Authorization` header, or let a response body out unredacted.

use super::config::{ApiKey, ProviderConfig};
use super::record::{AttemptRecord, ModelCallRecord};
use super::redact::redact;
use super::{ChatRequest, ChatResponse, NetworkKind, ProviderError, Usage};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The longest `Retry-After` the client waits out; a provider asking for more gets its
/// `api`/`backoff` error passed to the model at once.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Most bytes of an error body kept (redacted) in the error message.
pub(crate) const ERROR_BODY_MAX_CHARS: usize = 500;

/// Most bytes of a response body read.
pub(crate) const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Each backoff is its nominal delay times a uniform factor in 1 ± this (±25 %), so
/// clients that failed together do not retry together.
pub(crate) const BACKOFF_JITTER: f64 = 0.25;

/// An OpenAI-compatible endpoint.
#[derive(Debug)]
pub(crate) struct HttpProvider {
    config: ProviderConfig,
    client: reqwest::Client,
}

/// How one attempt ended.
struct AttemptOutcome {
    result: Result<ChatResponse, ProviderError>,
    status: Option<u16>,
}

/// The HTTP client a model endpoint is called through: `timeout` per attempt, connecting
/// within `timeout` or `connect_cap`, whichever is shorter, our user agent, no redirect
/// followed (a 3xx would re-send the prompt wherever it points: [`redirect_message`]).
pub(crate) fn client(timeout: Duration, connect_cap: Duration) -> reqwest::Client {
    // rustls needs a process-wide crypto provider; ring builds lean. Installing twice is
    // harmless (the first stays).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(connect_cap))
        .user_agent(concat!("reasoning-ledger/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_else(|error| {
            tracing::error!("building the HTTP client failed ({error}); using defaults");
            reqwest::Client::new()
        })
}

/// A redirect answer (3xx) as the error it is, naming where it pointed: redirects are
/// never followed, since the request (a prompt, texts to embed) would go to another host.
/// `None` for any other status.
pub(crate) fn redirect_message(response: &reqwest::Response) -> Option<String> {
    let status = response.status();
    if !status.is_redirection() {
        return None;
    }
    let to = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|location| response.url().join(location).ok())
        .and_then(|url| {
            let host = url.host_str()?.to_string();
            Some(match url.port() {
                Some(port) => format!("{host}:{port}"),
                None => host,
            })
        })
        .unwrap_or_else(|| "an unnamed location".to_string());
    Some(format!(
        "the provider answered a redirect ({}) to {to}; redirects are not followed: set the endpoint's final URL",
        status.as_u16()
    ))
}

impl HttpProvider {
    pub(crate) fn new(config: ProviderConfig) -> Self {
        let client = client(config.timeout, Duration::from_secs(30));
        HttpProvider { config, client }
    }

    pub(crate) fn config(&self) -> &ProviderConfig {
        &self.config
    }

    fn known_keys(&self) -> Vec<&str> {
        self.config.api_key.iter().map(|k| k.expose()).collect()
    }

    fn clean(&self, text: &str) -> String {
        redact(text, &self.known_keys())
    }

    /// The request body (the key is not in it).
    pub(crate) fn body(&self, chat: &ChatRequest) -> Value {
        let mut messages = Vec::with_capacity(chat.messages.len() + 1);
        if let Some(system) = &chat.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        for message in &chat.messages {
            messages.push(json!({"role": message.role, "content": message.content}));
        }
        let mut body = json!({"model": self.config.model, "messages": messages, "stream": false});
        if let Some(t) = chat.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(p) = chat.top_p {
            body["top_p"] = json!(p);
        }
        if let Some(m) = chat.max_tokens {
            body["max_tokens"] = json!(m);
        }
        if !chat.stop.is_empty() {
            body["stop"] = json!(chat.stop);
        }
        if let Some(seed) = chat.seed {
            body["seed"] = json!(seed);
        }
        if self.config.thinking {
            body["thinking"] = json!({"type": "enabled"});
        }
        body
    }

    /// The backoff before retry `retry` (1-based): about base × (2^retry − 1),
    /// i.e. 1 s, 3 s, 7 s, with ±25 % jitter.
    fn backoff(&self, retry: u32) -> Duration {
        let factor = (1u64 << retry) - 1;
        let base = self.config.backoff.as_secs_f64() * factor as f64;
        let jitter = 1.0 - BACKOFF_JITTER + 2.0 * BACKOFF_JITTER * fastrand::f64();
        Duration::from_secs_f64(base * jitter)
    }

    /// Runs the call with its retries; returns the answer or the last error, and the
    /// record of every attempt.
    pub(crate) async fn complete(
        &self,
        chat: &ChatRequest,
        cancel: &CancellationToken,
    ) -> (Result<ChatResponse, ProviderError>, ModelCallRecord) {
        let started = Instant::now();
        let body = self.body(chat);
        let mut attempts = Vec::new();
        let mut waited = Duration::ZERO;
        let mut total_cost: Option<f64> = None;
        let result = loop {
            let attempt_started = Instant::now();
            let attempt_no = attempts.len() as u32 + 1;
            let outcome = tokio::select! {
                biased;
                () = cancel.cancelled() => AttemptOutcome { result: Err(ProviderError::Cancelled), status: None },
                outcome = self.attempt(&body) => outcome,
            };
            let latency_ms = attempt_started.elapsed().as_millis() as u64;
            let usage = outcome.result.as_ref().ok().and_then(|r| r.usage);
            let cost = match (self.config.prices, usage) {
                (Some(prices), Some(usage)) => Some(prices.cost(&usage)),
                _ => None,
            };
            if let Some(cost) = cost {
                total_cost = Some(total_cost.unwrap_or(0.0) + cost);
            }
            let retry_after_ms = match &outcome.result {
                Err(ProviderError::Api { retry_after_ms, .. }) => *retry_after_ms,
                _ => None,
            };
            attempts.push(AttemptRecord {
                attempt: attempt_no,
                waited_ms: waited.as_millis() as u64,
                latency_ms,
                status: outcome.status,
                usage,
                cost,
                error: outcome.result.as_ref().err().cloned(),
                retry_after_ms,
            });
            match outcome.result {
                Ok(response) => break Ok(response),
                Err(error) => {
                    let retries_done = attempt_no - 1;
                    if !error.retryable() || retries_done >= self.config.max_retries {
                        break Err(error);
                    }
                    let wait = match retry_after_ms {
                        Some(ms) if Duration::from_millis(ms) > MAX_RETRY_AFTER => {
                            break Err(error);
                        }
                        Some(ms) => Duration::from_millis(ms),
                        None => self.backoff(retries_done + 1),
                    };
                    tracing::warn!(
                        provider = %self.config.name,
                        attempt = attempt_no,
                        wait_ms = wait.as_millis() as u64,
                        "model call failed, retrying: {error}"
                    );
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => break Err(ProviderError::Cancelled),
                        () = tokio::time::sleep(wait) => {}
                    }
                    waited = wait;
                }
            }
        };
        let record = ModelCallRecord {
            provider: self.config.name.clone(),
            model: self.config.model.clone(),
            transport: "http".into(),
            request: chat.clone(),
            response: result.as_ref().ok().cloned(),
            error: result.as_ref().err().cloned(),
            attempts,
            latency_ms: started.elapsed().as_millis() as u64,
            usage: result.as_ref().ok().and_then(|r| r.usage),
            cost: total_cost,
        };
        (result, record)
    }

    async fn attempt(&self, body: &Value) -> AttemptOutcome {
        let url = format!("{}/chat/completions", self.config.base_url);
        let request = json_post(&self.client, &url, body, self.config.api_key.as_ref());
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                return AttemptOutcome {
                    result: Err(self.network_error(&error)),
                    status: None,
                };
            }
        };
        let status = response.status().as_u16();
        if let Some(message) = redirect_message(&response) {
            return AttemptOutcome {
                result: Err(ProviderError::Api {
                    provider: self.config.name.clone(),
                    status,
                    message: self.clean(&message),
                    retry_after_ms: None,
                }),
                status: Some(status),
            };
        }
        let header_retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_seconds);
        let bytes = match read_limited(response).await {
            Ok(bytes) => bytes,
            Err(error) => {
                return AttemptOutcome {
                    result: Err(self.network_error(&error)),
                    status: Some(status),
                };
            }
        };
        let provider = self.config.name.clone();
        if !(200..300).contains(&status) {
            let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
            let body_retry_after = parsed
                .as_ref()
                .and_then(|v| v.pointer("/error/retry_after"))
                .and_then(|v| match v {
                    Value::Number(n) => n.as_f64().map(|s| (s * 1000.0) as u64),
                    Value::String(s) => parse_seconds(s),
                    _ => None,
                });
            let message = parsed
                .as_ref()
                .and_then(|v| {
                    v.pointer("/error/message")
                        .or_else(|| v.get("message"))
                        .or_else(|| v.get("error"))
                })
                .map(|m| match m {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
            let message: String = self
                .clean(&message)
                .chars()
                .take(ERROR_BODY_MAX_CHARS)
                .collect();
            return AttemptOutcome {
                result: Err(ProviderError::Api {
                    provider,
                    status,
                    message: if message.trim().is_empty() {
                        format!("HTTP {status} with an empty body")
                    } else {
                        message
                    },
                    retry_after_ms: header_retry_after.or(body_retry_after),
                }),
                status: Some(status),
            };
        }
        AttemptOutcome {
            result: parse_completion(&bytes, &self.config.model).map_err(|message| {
                ProviderError::BadResponse {
                    provider,
                    message: self.clean(&message),
                }
            }),
            status: Some(status),
        }
    }

    fn network_error(&self, error: &reqwest::Error) -> ProviderError {
        let kind = classify(error);
        let message = match kind {
            NetworkKind::Timeout => format!(
                "no answer within {} s (timeout); the provider may be overloaded",
                self.config.timeout.as_secs_f64()
            ),
            _ => self.clean(&error_chain(error)),
        };
        ProviderError::Network {
            provider: self.config.name.clone(),
            network: kind,
            message,
        }
    }
}

/// A POST of `body` as JSON to `url`, with `key` as the bearer token when there is one
/// (the only place a key goes: the Authorization header).
pub(crate) fn json_post(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    key: Option<&ApiKey>,
) -> reqwest::RequestBuilder {
    let request = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(body).expect("a request body serializes"));
    match key {
        Some(key) => request.bearer_auth(key.expose()),
        None => request,
    }
}

/// A failed request's text with every cause after it: reqwest's own text is only "error
/// sending request".
pub(crate) fn error_chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Reads at most [`MAX_RESPONSE_BYTES`] of a body.
pub(crate) async fn read_limited(
    mut response: reqwest::Response,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_RESPONSE_BYTES.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if room <= chunk.len() {
            break;
        }
    }
    Ok(out)
}

/// How a request failed before an HTTP answer came.
pub(crate) fn classify(error: &reqwest::Error) -> NetworkKind {
    if error.is_timeout() {
        return NetworkKind::Timeout;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            return match io.kind() {
                ConnectionRefused => NetworkKind::Refused,
                ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof => {
                    NetworkKind::Reset
                }
                HostUnreachable | NetworkUnreachable | AddrNotAvailable => NetworkKind::Unreachable,
                TimedOut => NetworkKind::Timeout,
                _ => NetworkKind::Other,
            };
        }
        let text = cause.to_string().to_ascii_lowercase();
        if text.contains("dns")
            || text.contains("failed to lookup")
            || text.contains("name resolution")
        {
            return NetworkKind::Dns;
        }
        source = cause.source();
    }
    if error.is_connect() {
        NetworkKind::Unreachable
    } else {
        NetworkKind::Other
    }
}

/// `Retry-After` seconds (an integer or a decimal), in milliseconds; an HTTP date is not
/// read (the backoff applies).
pub(crate) fn parse_seconds(text: &str) -> Option<u64> {
    let seconds: f64 = text.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then_some((seconds * 1000.0) as u64)
}

/// A chat completion's answer, or what is wrong with the body.
pub(crate) fn parse_completion(bytes: &[u8], asked_model: &str) -> Result<ChatResponse, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        let start: String = String::from_utf8_lossy(bytes).chars().take(120).collect();
        format!("not JSON ({e}); it starts with {start:?}")
    })?;
    let choice = value
        .pointer("/choices/0")
        .ok_or("no choices[0] in the answer")?;
    let message = choice.get("message").ok_or("no choices[0].message")?;
    let content = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let reasoning = message
        .get("reasoning_content")
        .and_then(Value::as_str)
        .map(str::to_string);
    let usage = value.get("usage").and_then(|u| {
        let n = |key: &str| u.get(key).and_then(Value::as_u64);
        let prompt = n("prompt_tokens")?;
        let completion = n("completion_tokens").unwrap_or(0);
        Some(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: n("total_tokens").unwrap_or(prompt + completion),
            cached_prompt_tokens: n("prompt_cache_hit_tokens").or_else(|| {
                u.pointer("/prompt_tokens_details/cached_tokens")
                    .and_then(Value::as_u64)
            }),
        })
    });
    Ok(ChatResponse {
        content,
        reasoning,
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage,
        model: value
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(asked_model)
            .to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_is_parsed_with_cached_tokens() {
        let body = br#"{"model":"m1","choices":[{"message":{"role":"assistant","content":"hi","reasoning_content":"r"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"prompt_cache_hit_tokens":8}}"#;
        let r = parse_completion(body, "asked").unwrap();
        assert_eq!(r.content, "hi");
        assert_eq!(r.reasoning.as_deref(), Some("r"));
        assert_eq!(r.usage.unwrap().cached_prompt_tokens, Some(8));
        assert!(
            parse_completion(b"<html>", "m")
                .unwrap_err()
                .contains("not JSON")
        );
        assert!(
            parse_completion(b"{}", "m")
                .unwrap_err()
                .contains("choices")
        );
    }

    #[test]
    fn backoff_grows_about_1_3_7_with_jitter() {
        let mut config = crate::provider::ProviderSettings::from_sources(
            &crate::provider::config::Variables::from_map(
                [("OPENAI_API_KEY".to_string(), "sk-test-000000".to_string())].into(),
            ),
            None,
        )
        .provider
        .unwrap();
        config.backoff = Duration::from_secs(1);
        let provider = HttpProvider::new(config);
        for (retry, nominal) in [(1, 1.0), (2, 3.0), (3, 7.0)] {
            let d = provider.backoff(retry).as_secs_f64();
            assert!(d >= nominal * 0.75 && d <= nominal * 1.25, "{retry}: {d}");
        }
        assert_eq!(parse_seconds("2"), Some(2000));
        assert_eq!(parse_seconds("0.5"), Some(500));
        assert_eq!(parse_seconds("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}

#[cfg(test)]
mod loopback_tests {
    use super::*;
    use crate::provider::config::ProviderConfig;
    use std::io::{Read, Write};

    /// Serves `answers` (status line + headers + body, one per connection) on 127.0.0.1.
    fn serve(answers: Vec<String>) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for answer in answers {
                let (mut stream, _) = listener.accept().unwrap();
                let mut buf = vec![0u8; 65536];
                let mut got = Vec::new();
                // Headers, then the body by Content-Length.
                loop {
                    let n = stream.read(&mut buf).unwrap();
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if got.len() >= end + 4 + length {
                            break;
                        }
                    }
                    if n == 0 {
                        break;
                    }
                }
                seen.push(String::from_utf8_lossy(&got).to_string());
                stream.write_all(answer.as_bytes()).unwrap();
            }
            seen
        });
        (url, handle)
    }

    fn http(status: &str, headers: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{headers}\r\n{body}",
            body.len()
        )
    }

    fn provider(url: &str) -> HttpProvider {
        HttpProvider::new(ProviderConfig {
            name: "custom".into(),
            base_url: url.into(),
            model: "m".into(),
            api_key: Some(ApiKey::new("sk-canary-0123456789")),
            timeout: Duration::from_secs(5),
            backoff: Duration::from_millis(10),
            max_retries: 3,
            prices: None,
            thinking: false,
        })
    }

    #[tokio::test]
    async fn a_429_is_retried_after_its_retry_after_and_every_attempt_is_recorded() {
        let ok = r#"{"model":"m","choices":[{"message":{"content":"fine"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
        let (url, server) = serve(vec![
            http(
                "429 Too Many Requests",
                "retry-after: 1\r\n",
                r#"{"error":{"message":"slow down, key sk-canary-0123456789"}}"#,
            ),
            http("200 OK", "", ok),
        ]);
        let (result, record) = provider(&url)
            .complete(
                &ChatRequest::single(None, "hello"),
                &CancellationToken::new(),
            )
            .await;
        assert_eq!(result.unwrap().content, "fine");
        assert_eq!(record.attempts.len(), 2);
        assert_eq!(record.attempts[0].status, Some(429));
        assert_eq!(record.attempts[0].retry_after_ms, Some(1000));
        assert_eq!(record.attempts[1].waited_ms, 1000);
        let json = serde_json::to_string(&record).unwrap();
        assert!(!json.contains("canary"), "{json}");
        let seen = server.join().unwrap();
        assert!(
            seen[0].contains("authorization: Bearer sk-canary-0123456789"),
            "{}",
            seen[0]
        );
    }

    #[tokio::test]
    async fn a_401_is_not_retried_and_a_503_is_retried_three_times() {
        let (url, _server) = serve(vec![http(
            "401 Unauthorized",
            "",
            r#"{"error":{"message":"bad key"}}"#,
        )]);
        let (result, record) = provider(&url)
            .complete(&ChatRequest::single(None, "x"), &CancellationToken::new())
            .await;
        let error = result.unwrap_err();
        assert_eq!(
            (error.error_type(), error.action()),
            (
                super::super::ErrorType::Api,
                super::super::ErrorAction::Report
            )
        );
        assert_eq!(record.attempts.len(), 1);

        let busy = http("503 Service Unavailable", "", "overloaded");
        let (url, _server) = serve(vec![busy.clone(), busy.clone(), busy.clone(), busy]);
        let (result, record) = provider(&url)
            .complete(&ChatRequest::single(None, "x"), &CancellationToken::new())
            .await;
        assert_eq!(result.unwrap_err().status_code(), Some(503));
        assert_eq!(record.attempts.len(), 4);
    }
}
