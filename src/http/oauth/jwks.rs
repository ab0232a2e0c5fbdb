//! The issuer's signing keys: discovery of its `jwks_uri`, fetching the JWKS, and the
//! cache `OAuth` verifies tokens against.
//!
//! Owns: the HTTP fetches to the issuer (reqwest, a timeout, a size cap, no redirects),
//! which JWKs are usable (RSA, EC P-256/P-384, Ed25519 signature keys; never `oct`), and
//! when the cache is refreshed: after [`JWKS_MAX_AGE`], and on a token whose `kid` is not
//! in it; at most once per [`MIN_REFRESH_INTERVAL`] either way (a flood of made-up kids,
//! or an issuer that is down, cannot make every request wait on a fetch). Must not: follow a redirect, or fetch over plain HTTP
//! anything but a loopback address.

use super::OAuthError;
use super::ring_provider::verifies;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use reqwest::Url;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How long one fetch from the issuer (metadata or JWKS) may take, connecting included.
pub(super) const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest metadata or JWKS document read from the issuer.
pub(super) const MAX_DOCUMENT_BYTES: usize = 512 * 1024;

/// Keys older than this are fetched again before the next token is checked (a key the
/// issuer withdrew stops being accepted within this time).
pub(super) const JWKS_MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// At most one refresh of the keys per this interval (for a token with an unknown `kid`
/// or keys past [`JWKS_MAX_AGE`]); the load at start does not count.
pub(super) const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(30);

/// Whether `url` may be fetched: https, or http to a loopback address (tests, a local
/// issuer).
pub(super) fn secure_or_loopback(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => {
            let host = url.host_str().unwrap_or_default();
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        _ => false,
    }
}

/// The HTTP client of every fetch to the issuer.
pub(super) fn client() -> reqwest::Client {
    // rustls needs a process-wide crypto provider; installing twice is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("reasoning-ledger/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_else(|error| {
            tracing::error!("building the HTTP client failed ({error}); using defaults");
            reqwest::Client::new()
        })
}

/// A fetch error with its causes (reqwest's own text is only "error sending request").
fn describe(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// GETs `url` and parses its JSON body (at most [`MAX_DOCUMENT_BYTES`]).
async fn fetch_json(client: &reqwest::Client, url: &Url) -> Result<serde_json::Value, OAuthError> {
    let fail = |reason: String| OAuthError::Fetch {
        url: url.to_string(),
        reason,
        answered: true,
    };
    let mut response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|error| OAuthError::Fetch {
            url: url.to_string(),
            reason: describe(error),
            answered: false,
        })?;
    if !response.status().is_success() {
        return Err(fail(format!("HTTP {}", response.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| fail(describe(error)))?
    {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(fail(format!("larger than {MAX_DOCUMENT_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|error| fail(format!("not JSON: {error}")))
}

/// Where the issuer's metadata may be, in the order the MCP authorization spec has
/// clients try: RFC 8414's `oauth-authorization-server` (path inserted), OpenID
/// Connect's `openid-configuration` (path inserted, then appended).
fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut candidates = Vec::new();
    let mut at = |path: String| {
        let mut url = issuer.clone();
        url.set_path(&path);
        url.set_query(None);
        if !candidates.contains(&url) {
            candidates.push(url);
        }
    };
    at(format!("/.well-known/oauth-authorization-server{path}"));
    at(format!("/.well-known/openid-configuration{path}"));
    if !path.is_empty() {
        at(format!("{path}/.well-known/openid-configuration"));
        at(format!("{path}/.well-known/oauth-authorization-server"));
    }
    candidates
}

/// The issuer's `jwks_uri`, from the first metadata document that names this issuer
/// exactly (RFC 8414 §3.3) and has one.
pub(super) async fn discover_jwks_uri(
    client: &reqwest::Client,
    issuer: &str,
) -> Result<Url, OAuthError> {
    let issuer_url = Url::parse(issuer).map_err(|_| OAuthError::Discovery {
        issuer: issuer.to_string(),
        reason: "not a URL".into(),
    })?;
    let mut tried = Vec::new();
    for url in metadata_urls(&issuer_url) {
        let document = match fetch_json(client, &url).await {
            Ok(document) => document,
            // No answer at all (refused, timed out): the other places are on the same host.
            Err(
                error @ OAuthError::Fetch {
                    answered: false, ..
                },
            ) => {
                tried.push(error.to_string());
                break;
            }
            Err(error) => {
                tried.push(error.to_string());
                continue;
            }
        };
        if document.get("issuer").and_then(|v| v.as_str()) != Some(issuer) {
            tried.push(format!(
                "{url}: its issuer is {}, not {issuer}",
                document.get("issuer").unwrap_or(&serde_json::Value::Null)
            ));
            continue;
        }
        let Some(jwks_uri) = document.get("jwks_uri").and_then(|v| v.as_str()) else {
            tried.push(format!("{url}: no jwks_uri"));
            continue;
        };
        let jwks_uri = Url::parse(jwks_uri).map_err(|_| OAuthError::Discovery {
            issuer: issuer.to_string(),
            reason: format!("{url}: jwks_uri {jwks_uri:?} is not a URL"),
        })?;
        if !secure_or_loopback(&jwks_uri) {
            return Err(OAuthError::Discovery {
                issuer: issuer.to_string(),
                reason: format!("jwks_uri {jwks_uri} is not https"),
            });
        }
        return Ok(jwks_uri);
    }
    Err(OAuthError::Discovery {
        issuer: issuer.to_string(),
        reason: tried.join("; "),
    })
}

/// One usable key of the issuer.
pub(super) struct VerifyKey {
    pub kid: Option<String>,
    /// The algorithms it verifies (its `alg` alone when the JWK names one).
    pub algorithms: Vec<Algorithm>,
    pub key: DecodingKey,
}

/// The algorithms a JWK's key may verify, or `None` if it is no signature key of ours.
fn usable_algorithms(jwk: &Jwk) -> Option<Vec<Algorithm>> {
    if matches!(
        jwk.common.public_key_use,
        Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
    ) {
        return None;
    }
    let family = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa.algorithms().to_vec(),
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            vec![Algorithm::EdDSA]
        }
        // `oct` (a shared secret) and anything else: never.
        _ => return None,
    };
    let algorithms: Vec<Algorithm> = match jwk.common.key_algorithm {
        None => family,
        Some(named) => {
            let named = Algorithm::try_from(named).ok()?;
            family.into_iter().filter(|a| *a == named).collect()
        }
    };
    let algorithms: Vec<Algorithm> = algorithms.into_iter().filter(|a| verifies(*a)).collect();
    (!algorithms.is_empty()).then_some(algorithms)
}

/// The usable keys of a JWKS document; keys that do not parse or do not fit are skipped.
pub(super) fn parse_jwks(document: &serde_json::Value) -> Vec<VerifyKey> {
    let Some(keys) = document.get("keys").and_then(|k| k.as_array()) else {
        return Vec::new();
    };
    keys.iter()
        .filter_map(|value| {
            let jwk: Jwk = serde_json::from_value(value.clone()).ok()?;
            let algorithms = usable_algorithms(&jwk)?;
            let key = DecodingKey::from_jwk(&jwk).ok()?;
            Some(VerifyKey {
                kid: jwk.common.key_id.clone(),
                algorithms,
                key,
            })
        })
        .collect()
}

/// The keys, when they were fetched, and when a refresh was last tried.
struct Cached {
    keys: Arc<Vec<VerifyKey>>,
    fetched: Instant,
    /// The last refresh tried (the load at start not counted), whether it worked or not.
    last_attempt: Option<Instant>,
}

/// The issuer's keys, shared by every request.
pub(super) struct KeyCache {
    client: reqwest::Client,
    jwks_uri: Url,
    cached: RwLock<Cached>,
    /// One refresh at a time.
    refreshing: tokio::sync::Mutex<()>,
}

/// Why keys are asked for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Need {
    /// The current keys (refreshed when older than [`JWKS_MAX_AGE`], without waiting for
    /// a refresh already under way).
    Current,
    /// A token names a kid these keys do not have: refresh and wait for it.
    UnknownKid,
}

impl KeyCache {
    /// Fetches the JWKS once: an unreachable issuer or one without a usable key fails here.
    pub(super) async fn load(client: reqwest::Client, jwks_uri: Url) -> Result<Self, OAuthError> {
        let keys = fetch_keys(&client, &jwks_uri).await?;
        if keys.is_empty() {
            return Err(OAuthError::NoUsableKey {
                jwks_uri: jwks_uri.to_string(),
            });
        }
        Ok(KeyCache {
            client,
            jwks_uri,
            cached: RwLock::new(Cached {
                keys: Arc::new(keys),
                fetched: Instant::now(),
                last_attempt: None,
            }),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    fn snapshot(&self) -> (Arc<Vec<VerifyKey>>, Instant, Option<Instant>) {
        let cached = self.cached.read().unwrap_or_else(|e| e.into_inner());
        (cached.keys.clone(), cached.fetched, cached.last_attempt)
    }

    /// The keys to check a token against, refreshed first when `need` calls for it and
    /// no refresh was tried in the last [`MIN_REFRESH_INTERVAL`]. A failed refresh keeps
    /// the keys there were.
    pub(super) async fn keys(&self, need: Need) -> Arc<Vec<VerifyKey>> {
        let (keys, fetched, last_attempt) = self.snapshot();
        let since = |at: Option<Instant>| at.map(|at| at.elapsed());
        if !refresh_due(need, fetched.elapsed(), since(last_attempt)) {
            return keys;
        }
        let _one_at_a_time = match need {
            Need::UnknownKid => self.refreshing.lock().await,
            Need::Current => match self.refreshing.try_lock() {
                Ok(guard) => guard,
                Err(_) => return keys,
            },
        };
        // Another request may have refreshed while this one waited: use its keys.
        let (keys, fetched, last_attempt) = self.snapshot();
        if !refresh_due(need, fetched.elapsed(), since(last_attempt)) {
            return keys;
        }
        let result = fetch_keys(&self.client, &self.jwks_uri).await;
        let mut cached = self.cached.write().unwrap_or_else(|e| e.into_inner());
        cached.last_attempt = Some(Instant::now());
        match result {
            Ok(fresh) if !fresh.is_empty() => {
                cached.keys = Arc::new(fresh);
                cached.fetched = Instant::now();
            }
            Ok(_) => tracing::warn!(
                jwks_uri = %self.jwks_uri,
                "the issuer's JWKS has no usable key now: keeping the previous keys"
            ),
            Err(error) => {
                tracing::warn!(%error, "refreshing the issuer's keys failed: keeping the previous keys")
            }
        }
        cached.keys.clone()
    }
}

/// Whether to fetch the keys now: asked for (an unknown kid, or keys `keys_age` old past
/// [`JWKS_MAX_AGE`]) and no refresh tried within [`MIN_REFRESH_INTERVAL`].
fn refresh_due(need: Need, keys_age: Duration, since_last_attempt: Option<Duration>) -> bool {
    let wanted = need == Need::UnknownKid || keys_age >= JWKS_MAX_AGE;
    wanted && since_last_attempt.is_none_or(|since| since >= MIN_REFRESH_INTERVAL)
}

async fn fetch_keys(
    client: &reqwest::Client,
    jwks_uri: &Url,
) -> Result<Vec<VerifyKey>, OAuthError> {
    let document = fetch_json(client, jwks_uri).await?;
    Ok(parse_jwks(&document))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_the_spec_says() {
        let urls = |issuer: &str| -> Vec<String> {
            metadata_urls(&Url::parse(issuer).unwrap())
                .iter()
                .map(|u| u.to_string())
                .collect()
        };
        assert_eq!(
            urls("https://auth.example/"),
            [
                "https://auth.example/.well-known/oauth-authorization-server",
                "https://auth.example/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            urls("https://kc.example/realms/team"),
            [
                "https://kc.example/.well-known/oauth-authorization-server/realms/team",
                "https://kc.example/.well-known/openid-configuration/realms/team",
                "https://kc.example/realms/team/.well-known/openid-configuration",
                "https://kc.example/realms/team/.well-known/oauth-authorization-server",
            ]
        );
    }

    #[test]
    fn only_asymmetric_signature_keys_are_used() {
        let document = serde_json::json!({"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "shared"},
            {"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "crv": "P-256", "kid": "ec",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "RSA", "kid": "rsa", "alg": "PS256", "n": "sXch", "e": "AQAB"},
            {"kty": "RSA", "kid": "rsa-enc-alg", "alg": "RSA-OAEP", "n": "sXch", "e": "AQAB"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "ed",
             "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
            {"kty": "weird"}
        ]});
        let keys = parse_jwks(&document);
        let summary: Vec<(Option<&str>, Vec<Algorithm>)> = keys
            .iter()
            .map(|k| (k.kid.as_deref(), k.algorithms.clone()))
            .collect();
        assert_eq!(
            summary,
            [
                (Some("ec"), vec![Algorithm::ES256]),
                (Some("rsa"), vec![Algorithm::PS256]),
                (Some("ed"), vec![Algorithm::EdDSA]),
            ]
        );
    }

    #[test]
    fn keys_are_fetched_when_asked_for_at_most_once_per_interval() {
        let fresh = Duration::from_secs(1);
        let old = JWKS_MAX_AGE;
        let long_ago = Some(MIN_REFRESH_INTERVAL);
        let just_now = Some(Duration::from_millis(5));
        // Fresh keys are used as they are; old ones are fetched again.
        assert!(!refresh_due(Need::Current, fresh, None));
        assert!(refresh_due(Need::Current, old, None));
        assert!(refresh_due(Need::Current, old, long_ago));
        // An unknown kid fetches, the first time after start too.
        assert!(refresh_due(Need::UnknownKid, fresh, None));
        assert!(refresh_due(Need::UnknownKid, fresh, long_ago));
        // Right after a try (it worked or the issuer is down): nothing, whatever is asked.
        assert!(!refresh_due(Need::UnknownKid, fresh, just_now));
        assert!(!refresh_due(Need::Current, old, just_now));
    }

    #[test]
    fn plain_http_only_to_loopback() {
        let ok = |u: &str| secure_or_loopback(&Url::parse(u).unwrap());
        assert!(ok("https://auth.example/"));
        assert!(ok("http://127.0.0.1:9/"));
        assert!(ok("http://[::1]:9/"));
        assert!(ok("http://localhost:9/"));
        assert!(!ok("http://auth.example/"));
        assert!(!ok("http://10.0.0.1/"));
        assert!(!ok("ftp://auth.example/"));
    }
}
