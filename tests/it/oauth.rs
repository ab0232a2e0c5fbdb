//! `serve --http … --oauth-issuer --oauth-audience` (issue 22): the built server against an
//! issuer served here on 127.0.0.1 (Keycloak-style metadata under a realm path, and a JWKS
//! that can rotate), with tokens signed here (ring: fixed RSA test keys, P-256 and Ed25519
//! keys generated per run).
//!
//! A good token is let in and its thought written; expired, not yet valid, wrong
//! audience, wrong issuer, a key not in the JWKS, `alg: none`, HS256 keyed with the public
//! key, no actor, garbage and no token at all each get 401 with the right
//! `WWW-Authenticate`, and nothing is written; the RFC 9728 metadata document; an unknown
//! kid refreshes the keys once (a flood of them fetches nothing more); the static token
//! works beside OAuth; bad settings stop the server at start.

use crate::common::{bin, data_dir, object, structured, thought};
use crate::surface::http_messages;
use ::base64::Engine as _;
use ::base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use bytes::Bytes;
use http_body_util::Full;
use ring::rand::SystemRandom;
use ring::signature::{self as sig, KeyPair};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long any one awaited step may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// The audience the server is started with (its canonical URL; the port is nominal).
const AUDIENCE: &str = "http://localhost:8765/mcp";

/// Where the server says its metadata is: the audience's origin, the well-known path,
/// the audience's path.
const RESOURCE_METADATA: &str = "http://localhost:8765/.well-known/oauth-protected-resource/mcp";

/// The static bearer token of these servers.
const STATIC_TOKEN: &str = "oauth-static-token-of-at-least-32-characters";

/// A 2048-bit RSA key (PKCS#1 DER, base64), made for these tests only: published in
/// the test issuer's JWKS as `rsa-1`.
const RSA_KEY_1: &[&str] = &[
    "MIIEowIBAAKCAQEArDq2t/lYtUxGZ/w2d+XeaYiIFVUK0LPQpggSbgtzfIIqZADk7q6V8y8Pq0s5dhVEe/tjBrSu",
    "L2h96L7wb+8kTJSnkxI52D7231KZVA2UElxpCc21QHz7SkIVWvWuOPzq+UxDsXABHp+LwlSOdvgPkfAlQgj8WjjO",
    "waXSQCvXeSNC6TiALMEBDU8ngYJV2L1nMa85kk3E/d0lrcAYaTC7AmsNKDsSXKshas45bmj2a6tgldDqcu8OJf++",
    "ojRbj0sbmg5u5T11lztMW4hx91NlOHbaH3HpjRMjUI0s4NnnEBOZ985RmrZPpRZnObopoYUt4j/WDZgu1hBNJFEZ",
    "wEmG9QIDAQABAoIBABYixmOMkt1bttGG8Ic7ePkOY73TfCbecurhWbZhbA/szj75Kx4O5qs7+WMWMYX0Q3o95qMw",
    "1hG2IoynUdFz0TIIidB/b1t+8uLkGQcyZugZ5CQu7Ln49kvmhMZ35321QAwXmbxfUr2EBbCjMTD9k/QOrfM3+Bsu",
    "dvXGTBNprxwx+SfmefYDjshTOZ8qTF3wY6CMxBXhRNjPuWz+PsFFw3peyN6vttWjvmdXJcviCV71ISITAy1Nlrcu",
    "E1zvuSMEs8A/yemAeR9lcQ9YgzIJTrGGTX7OKZUbIzex+QicICD9PfwSKpbW8C518Erw4moQujtybsl4bDaOFZOh",
    "neBUrFcCgYEA2q5WdyNGQKd0QDvqWoaHzRGVZyZtekJ0U4l3BCcRA8FTutDEYldFqQOr9TiMqtim/GWD7qd80Zrf",
    "H6w+SGBYFks1KrneoATtU9tVt3CSiHNfqUX2ZfoISlTvXCjdHIHrOctPHUbrSukvM1gKaZdybgl9VCRJR9kbt28Q",
    "dwdyAlcCgYEAyZ8C/B7dcmOoDv99tN/hdXGTcB96raLzmbTltXQt96GhKfyNa6HvWVwMmPvhzHQMHQOAxQSgYGna",
    "qAmgpl8SBJCbQDWm0JdT1nfAf2WDn/mdIR+OszTN3Euwg82ghybT3EBUEVSP6OXM6R65ZikW45AFUWcr/bebLn/F",
    "b1M36ZMCgYEAowVEQBxzys8KwrfnxQR1SFLLZdIn2vSfc4cOynG1JW+B08q+G/GjZJPwJSa69sH7+jxTVh5V1ov1",
    "uc7Vv27TPAtk3y0g4XnK0rC3/cBV/JLFxZL6VJtIguE+bx2neBECIluF5vVvgrDDFyuS15SnIZDBdXB3kLAxEVYi",
    "mBlczJECgYAvQEvTyGv/hel58liEjj9pZb+29Dms/dZ3PFTlTKAFO+ToUR7XjbDpUVBGfilx3/SCzDJeefIYBlbP",
    "MMpskzVGypkH2EsK8ZwdVB1R/fl2AWrYu2uXBhYEvdxVV1h6tBfMs2rAUQAVBd4a+C9dCN4rYLJOXI6LvH7qy9j6",
    "eRdObwKBgGDIQ3gMVsV5Doc9hDDPf9s61/kkUZHYwvydfJCcmqYkkFB2+GjsNLdpT5PNeXK4zwdGdCwsDZqc59ZH",
    "psvnG4Nvc7S2lJj6BWrEC6NJlPbTCdjn7gybsePwWP1BZlfRjzWFJJBCrR2ZrGPUjrs0GvFAP5nJ4JhQq60gPTjn",
    "GOB4",
];

/// Another RSA test key, never published: an attacker's.
const RSA_KEY_2: &[&str] = &[
    "MIIEowIBAAKCAQEAv5eD+7HCJFY3m/nulHWRfnPBFg21zG8BxFnNXnfG0IsTkhvvB5vnzGgm987PXMb3QPNz4XdG",
    "6cPhlthHt7t4nKHYKF+NWvrbniPa9KMnchGK58DJEYlp+XPm4xiDeSpkrDYPP5GA60d9g/JtYHCmfW2YaGYcfBzJ",
    "7XjU9OnvQNgElJgR2HWyjriW/X6skoTY10o4j8WY1uLwjWxQCROtXu3AmUZ3RKKCTWikFDRxy3PdSMJBVsODMaJ0",
    "4CS/KGIQKDaUeRLfMoxcLUKVNrZzdWobFq9rjcEh0TlGXmiBcpIi5wR2EsWtaLQHaDJgdz2ebQ9czQ9dSzLUaRC9",
    "Eyy5MQIDAQABAoIBAAW4a6WmcU4978OdswCmQP2WTa/PoXu03cfjyYS2TU6ZNHCimmCvCDz7aBxyhZD21NeQ3Ucg",
    "VVLx+QiUtRF4jLmagHZ2IeWTQ17loao3u9wFR5EzWZ2HLY2X5w8lQnmp6R8WLx7eBIwh0o7PvHHKc0If9VK6p8OR",
    "5XqMZslYOb9FFpIrODl5Wht57PR/hchRe9ZA8kf5Tjlpltjo9eGha3dmkZLEHUi5AWmUv4WEGvloVosaj4JmFlCS",
    "q0AGEZbc1EwiNkW5FE7f0ff35X3k9qC5vwN46n7LkDHnD0QL061gO23IDMo+lINF1NStn5NWrNtcbAY9bv8VHf1S",
    "2f3e4YECgYEA9v7ECLFnQjNylx7pLJM7dm0IWTFtLYUaCJTqHHiX6LGrsS+qd/Lkj0CvB5aRisrdb1Ph0xNW/sKB",
    "BZzBaH3BwUn0fx+HUL/lSrCCidwS1tzICngwyMXbgq0NzhctC1jg1dZfbg2quOdG6FUlPtY9BNdpwk5907hAnBec",
    "vESObCECgYEAxpOqDbTMwIMKi+6dDSZnB5arYbewvFbxuTtrkAQY2UXuXZrGzfw9bL4Coh1UVzgmLztIKdhT3Fzy",
    "jjY7D6Kfogw17beQuFoa+IbPGE0Bi01THGXa14r0orX6c8iT1wSsdASDVV3sLsbJPomfCcHwQOCsdE3GVCkwSfzk",
    "krfOKxECgYBapKZmlkxRxDWydfqWjDXPQTZGHVh20xj5u0SrTCpbkBB1RwvlVzM/yzowq7Yf3FElUQBYCQntFo5o",
    "890arsQTXkOm/3gWT0YjgeF2HFihl4amKPOmSs5DB6VAU8sJFgX1E+YTqlpT3zRrgQvZIqBkDXXXhByzPTQg1J2F",
    "jhdCYQKBgEokFej6KTxzcLugQokHXo5pxeE9KUKYn7XOJrHlpbVxs7bFNBbyZ6izJN6MXtIVx8P4uU/OUjlDhths",
    "DQ8gY8OoFXaFBAagtdM22hmznrD5FN/Uc6noWsBpe3JBYFl2iEDk8ngsEiPA2qB716JYA7Dlcd4Wr8b6feoR/vF8",
    "qQBRAoGBALXgZxryerrZRmNCiqHYRKFcGzgrY2ko1CpD0HAZNUh5ZapX5cMq6/4OtNoS4PfALTx9cduHu5oxxNOZ",
    "rNlD5zGX20EAEvP69+gsKGrxcaIVn6Yi0Irw783JQ+z41YZkjr+jqkQ+AT1jhikQzACM05GHAtZmyDGoP3s66EDD",
    "t3HQ",
];

fn rsa_key(parts: &[&str]) -> sig::RsaKeyPair {
    let der = ::base64::engine::general_purpose::STANDARD
        .decode(parts.concat())
        .unwrap();
    sig::RsaKeyPair::from_der(&der).unwrap()
}

/// A signing key of the tests.
enum Key {
    Rsa(sig::RsaKeyPair),
    Ec(sig::EcdsaKeyPair),
    Ed(sig::Ed25519KeyPair),
}

impl Key {
    fn ec() -> Key {
        let rng = SystemRandom::new();
        let alg = &sig::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = sig::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        Key::Ec(sig::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap())
    }

    fn ed() -> Key {
        let pkcs8 = sig::Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        Key::Ed(sig::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap())
    }

    fn alg(&self) -> &'static str {
        match self {
            Key::Rsa(_) => "RS256",
            Key::Ec(_) => "ES256",
            Key::Ed(_) => "EdDSA",
        }
    }

    /// The public JWK, under `kid`.
    fn jwk(&self, kid: &str) -> Value {
        match self {
            Key::Rsa(key) => {
                let parts: sig::RsaPublicKeyComponents<Vec<u8>> = key.public().into();
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                       "n": B64.encode(&parts.n), "e": B64.encode(&parts.e)})
            }
            Key::Ec(key) => {
                let point = key.public_key().as_ref();
                json!({"kty": "EC", "kid": kid, "crv": "P-256",
                       "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65])})
            }
            Key::Ed(key) => json!({"kty": "OKP", "kid": kid, "crv": "Ed25519",
                                   "x": B64.encode(key.public_key().as_ref())}),
        }
    }

    fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match self {
            Key::Rsa(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(&sig::RSA_PKCS1_SHA256, &rng, message, &mut signature)
                    .unwrap();
                signature
            }
            Key::Ec(key) => key.sign(&rng, message).unwrap().as_ref().to_vec(),
            Key::Ed(key) => key.sign(message).as_ref().to_vec(),
        }
    }
}

/// `header.claims` in compact form, and the message a signature covers.
fn unsigned(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        B64.encode(header.to_string()),
        B64.encode(claims.to_string())
    )
}

/// A JWT signed by `key` with `kid` in its header.
fn jwt(key: &Key, kid: Option<&str>, claims: &Value) -> String {
    let mut header = json!({"alg": key.alg(), "typ": "at+jwt"});
    if let Some(kid) = kid {
        header["kid"] = json!(kid);
    }
    let message = unsigned(&header, claims);
    format!("{message}.{}", B64.encode(key.sign(message.as_bytes())))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A token's claims: for `sub`, from `issuer`, for [`AUDIENCE`], valid for an hour.
fn claims(issuer: &str, sub: &str) -> Value {
    json!({"iss": issuer, "aud": AUDIENCE, "sub": sub, "iat": now(), "exp": now() + 3600})
}

/// The issuer: OpenID metadata under a realm path (as Keycloak serves it) and a JWKS
/// that the test can change, counting its fetches.
struct Issuer {
    url: String,
    jwks: Arc<Mutex<Value>>,
    jwks_fetches: Arc<AtomicUsize>,
}

impl Issuer {
    async fn start(jwks: Value) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let url = format!("{base}/realms/test");
        let jwks = Arc::new(Mutex::new(jwks));
        let jwks_fetches = Arc::new(AtomicUsize::new(0));
        let (served_jwks, fetches, issuer) = (jwks.clone(), jwks_fetches.clone(), url.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (jwks, fetches, issuer) =
                    (served_jwks.clone(), fetches.clone(), issuer.clone());
                tokio::spawn(async move {
                    let handler = hyper::service::service_fn(
                        move |request: hyper::Request<hyper::body::Incoming>| {
                            let (jwks, fetches, issuer) =
                                (jwks.clone(), fetches.clone(), issuer.clone());
                            async move {
                                let path = request.uri().path();
                                let (status, body) = if path
                                    == "/realms/test/.well-known/openid-configuration"
                                {
                                    let metadata = json!({
                                        "issuer": issuer,
                                        "jwks_uri": format!("{issuer}/protocol/openid-connect/certs"),
                                        "authorization_endpoint": format!("{issuer}/protocol/openid-connect/auth"),
                                        "token_endpoint": format!("{issuer}/protocol/openid-connect/token"),
                                    });
                                    (200, metadata.to_string())
                                } else if path == "/realms/test/protocol/openid-connect/certs" {
                                    fetches.fetch_add(1, Ordering::SeqCst);
                                    (200, jwks.lock().unwrap().to_string())
                                } else {
                                    (404, "not found".to_string())
                                };
                                let mut response =
                                    hyper::Response::new(Full::new(Bytes::from(body)));
                                *response.status_mut() =
                                    hyper::StatusCode::from_u16(status).unwrap();
                                Ok::<_, std::convert::Infallible>(response)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), handler)
                        .await;
                });
            }
        });
        Issuer {
            url,
            jwks,
            jwks_fetches,
        }
    }

    fn fetches(&self) -> usize {
        self.jwks_fetches.load(Ordering::SeqCst)
    }
}

/// `serve --http 127.0.0.1:0` with OAuth from `issuer` and [`STATIC_TOKEN`].
struct Server {
    _child: tokio::process::Child,
    /// `http://127.0.0.1:PORT`
    base: String,
}

fn command(dir: &Path, issuer: &str, audience: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(bin());
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .args(["--toolsets", "thinking,ledger", "--http", "127.0.0.1:0"])
        .args(["--oauth-issuer", issuer, "--oauth-audience", audience])
        .env("REASONING_LEDGER_TOKEN", STATIC_TOKEN)
        .env("DISABLE_THOUGHT_LOGGING", "true")
        .env_remove("REASONING_LEDGER_TOOLSETS")
        .env_remove("REASONING_LEDGER_STORE")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

impl Server {
    async fn start(dir: &Path, issuer: &Issuer) -> Server {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut child = command(dir, &issuer.url, AUDIENCE).spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let base = loop {
            let line = tokio::time::timeout(PATIENCE, lines.next_line())
                .await
                .expect("the server says where it listens")
                .unwrap()
                .expect("the server is running");
            if line.contains("serving MCP")
                && let Some(start) = line.find("http://")
            {
                let url = line[start..].split_whitespace().next().unwrap();
                break url.strip_suffix("/mcp").unwrap().to_string();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Server {
            _child: child,
            base,
        }
    }

    /// Posts a 2026-07-28 `tools/call` (served statelessly: no `initialize` first) with
    /// `bearer`; returns the status, the `WWW-Authenticate` header and the answer.
    async fn call(&self, bearer: Option<&str>, tool: &str, arguments: Value) -> Answer {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, "_meta": crate::surface::meta_2026(None)}});
        let mut request = reqwest::Client::new()
            .post(format!("{}/mcp", self.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool);
        if let Some(bearer) = bearer {
            request = request.header("authorization", format!("Bearer {bearer}"));
        }
        let response = tokio::time::timeout(PATIENCE, request.body(message.to_string()).send())
            .await
            .expect("an answer in time")
            .expect("http");
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_string());
        let body = response.text().await.unwrap();
        let message = if status == 200 {
            http_messages(&body)
                .into_iter()
                .find(|m| m["id"] == json!(1))
        } else {
            None
        };
        Answer {
            status,
            challenge,
            message,
            body,
        }
    }

    /// The sessions the ledger lists (asked with the static token).
    async fn session_count(&self) -> usize {
        let answer = self
            .call(Some(STATIC_TOKEN), "list_sessions", json!({}))
            .await;
        let result = answer.message.expect("list_sessions answered")["result"].clone();
        let result: rmcp::model::CallToolResult = serde_json::from_value(result).unwrap();
        structured(&result)["sessions"].as_array().unwrap().len()
    }
}

struct Answer {
    status: u16,
    challenge: Option<String>,
    message: Option<Value>,
    body: String,
}

impl Answer {
    /// Whether the call ran the tool and it succeeded.
    fn succeeded(&self) -> bool {
        self.status == 200
            && self
                .message
                .as_ref()
                .is_some_and(|m| m.get("result").is_some() && m["result"]["isError"] != json!(true))
    }
}

fn refused_challenge(description: &str) -> String {
    format!(
        "Bearer resource_metadata=\"{RESOURCE_METADATA}\", error=\"invalid_token\", error_description=\"{description}\""
    )
}

/// The published keys: `rsa-1`, an EC and an Ed25519 key.
struct Keys {
    rsa: Key,
    ec: Key,
    ed: Key,
}

impl Keys {
    fn new() -> Keys {
        Keys {
            rsa: Key::Rsa(rsa_key(RSA_KEY_1)),
            ec: Key::ec(),
            ed: Key::ed(),
        }
    }

    fn jwks(&self) -> Value {
        json!({"keys": [
            // A shared secret in the JWKS is never used.
            {"kty": "oct", "kid": "rsa-1", "k": B64.encode(b"a shared secret")},
            self.rsa.jwk("rsa-1"), self.ec.jwk("ec-1"), self.ed.jwk("ed-1")
        ]})
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_good_token_of_the_issuer_for_this_audience_gets_in() {
    let keys = Keys::new();
    let issuer = Issuer::start(keys.jwks()).await;
    let dir = data_dir();
    let server = Server::start(dir.path(), &issuer).await;
    let iss = issuer.url.as_str();
    let write = thought(1, 1, false, "written with a token");

    let mut expired = claims(iss, "ann");
    expired["exp"] = json!(now() - 600);
    let mut early = claims(iss, "ann");
    early["nbf"] = json!(now() + 600);
    let mut other_audience = claims(iss, "ann");
    other_audience["aud"] = json!("http://localhost:8765/other");
    let other_issuer = claims("http://127.0.0.1:1/realms/test", "ann");
    let mut no_actor = claims(iss, "ann");
    no_actor.as_object_mut().unwrap().remove("sub");
    let mut no_exp = claims(iss, "ann");
    no_exp.as_object_mut().unwrap().remove("exp");
    let good = claims(iss, "ann");
    let none = format!(
        "{}.",
        unsigned(&json!({"alg": "none", "typ": "JWT"}), &good)
    );
    let public_key = match &keys.rsa {
        Key::Rsa(key) => key.public().as_ref().to_vec(),
        _ => unreachable!(),
    };
    let hs256 = {
        let message = unsigned(&json!({"alg": "HS256", "kid": "rsa-1"}), &good);
        let mac = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &public_key),
            message.as_bytes(),
        );
        format!("{message}.{}", B64.encode(mac.as_ref()))
    };
    let hs256_shared = {
        let message = unsigned(&json!({"alg": "HS256", "kid": "rsa-1"}), &good);
        let mac = ring::hmac::sign(
            &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"a shared secret"),
            message.as_bytes(),
        );
        format!("{message}.{}", B64.encode(mac.as_ref()))
    };
    let foreign = Key::Rsa(rsa_key(RSA_KEY_2));
    let foreign_ec = Key::ec();
    let mut tampered = jwt(&keys.rsa, Some("rsa-1"), &good);
    tampered = {
        let parts: Vec<&str> = tampered.split('.').collect();
        let mut changed = good.clone();
        changed["sub"] = json!("mallory");
        format!(
            "{}.{}.{}",
            parts[0],
            B64.encode(changed.to_string()),
            parts[2]
        )
    };

    let refused: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            jwt(&keys.rsa, Some("rsa-1"), &expired),
            "the token has expired",
        ),
        (
            "not yet valid",
            jwt(&keys.ec, Some("ec-1"), &early),
            "the token is not valid yet",
        ),
        (
            "wrong audience",
            jwt(&keys.rsa, Some("rsa-1"), &other_audience),
            "the token is for another audience",
        ),
        (
            "wrong issuer",
            jwt(&keys.rsa, Some("rsa-1"), &other_issuer),
            "the token is from another issuer",
        ),
        (
            "no exp",
            jwt(&keys.rsa, Some("rsa-1"), &no_exp),
            "the token has no exp claim",
        ),
        (
            "no actor",
            jwt(&keys.ed, Some("ed-1"), &no_actor),
            "the token names no usable actor (sub or name)",
        ),
        (
            "a key not in the JWKS, its kid",
            jwt(&foreign, Some("rsa-1"), &good),
            "the token's signature does not verify",
        ),
        (
            "an EC key not in the JWKS, its kid",
            jwt(&foreign_ec, Some("ec-1"), &good),
            "the token's signature does not verify",
        ),
        (
            "a key not in the JWKS, no kid",
            jwt(&foreign, None, &good),
            "the token's signature does not verify",
        ),
        (
            "claims changed after signing",
            tampered,
            "the token's signature does not verify",
        ),
        (
            "alg none",
            none,
            "the token's algorithm is not accepted (RS, PS, ES256, ES384 and EdDSA are)",
        ),
        (
            "HS256 keyed with the public key",
            hs256,
            "the token's algorithm is not accepted (RS, PS, ES256, ES384 and EdDSA are)",
        ),
        (
            "HS256 keyed with the JWKS's oct key",
            hs256_shared,
            "the token's algorithm is not accepted (RS, PS, ES256, ES384 and EdDSA are)",
        ),
        (
            "garbage",
            "not-a-jwt".to_string(),
            "the token is neither this server's bearer token nor a JWT",
        ),
        (
            "a wrong static token",
            "oauth-static-tokeN".to_string(),
            "the token is neither this server's bearer token nor a JWT",
        ),
    ];
    for (label, token, description) in &refused {
        let answer = server
            .call(Some(token), "sequentialthinking", write.clone())
            .await;
        assert_eq!(answer.status, 401, "{label}: {}", answer.body);
        assert_eq!(
            answer.challenge.as_deref(),
            Some(refused_challenge(description).as_str()),
            "{label}"
        );
        assert!(
            answer.body.contains(description),
            "{label}: {}",
            answer.body
        );
    }
    let answer = server.call(None, "sequentialthinking", write.clone()).await;
    assert_eq!(answer.status, 401);
    assert_eq!(
        answer.challenge.as_deref(),
        Some(format!("Bearer resource_metadata=\"{RESOURCE_METADATA}\"").as_str())
    );
    assert_eq!(
        server.session_count().await,
        0,
        "a refused call wrote nothing"
    );

    // Each published key's tokens are let in, `aud` as a string or an array, `name` when
    // there is no `sub`.
    let mut array_audience = claims(iss, "bob");
    array_audience["aud"] = json!(["https://elsewhere.example/", AUDIENCE]);
    let mut named = claims(iss, "x");
    named.as_object_mut().unwrap().remove("sub");
    named["name"] = json!("Carol");
    let mut skewed = claims(iss, "dan");
    skewed["exp"] = json!(now() - 10);
    let admitted = [
        ("RS256", jwt(&keys.rsa, Some("rsa-1"), &good)),
        ("ES256", jwt(&keys.ec, Some("ec-1"), &array_audience)),
        ("EdDSA", jwt(&keys.ed, Some("ed-1"), &named)),
        ("no kid", jwt(&keys.ec, None, &good)),
        (
            "expired within the leeway",
            jwt(&keys.rsa, Some("rsa-1"), &skewed),
        ),
    ];
    for (n, (label, token)) in admitted.iter().enumerate() {
        let text = format!("thought {n} with a token");
        let answer = server
            .call(
                Some(token),
                "sequentialthinking",
                thought(1, 1, false, &text),
            )
            .await;
        assert!(
            answer.succeeded(),
            "{label}: {} {}",
            answer.status,
            answer.body
        );
    }
    assert_eq!(server.session_count().await, admitted.len());
    assert_eq!(issuer.fetches(), 1, "the keys were fetched once, at start");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_initialize_client_with_a_token_writes_a_thought() {
    let keys = Keys::new();
    let issuer = Issuer::start(keys.jwks()).await;
    let dir = data_dir();
    let server = Server::start(dir.path(), &issuer).await;
    let token = jwt(&keys.rsa, Some("rsa-1"), &claims(&issuer.url, "ann"));
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", server.base))
        .auth_header(token);
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("initialize with an access token");
    let result = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("sequentialthinking")
                .with_arguments(object(thought(1, 1, false, "over initialize"))),
        )
        .await
        .unwrap();
    assert_eq!(structured(&result)["thoughtNumber"], json!(1));
    assert_eq!(server.session_count().await, 1);
}

/// Issue 36: an OAuth subject is recorded as `oauth:<sub>`, so a token whose `sub` is
/// `default` does not write as the shared bearer token's holder (`default`).
#[tokio::test(flavor = "multi_thread")]
async fn an_oauth_subject_named_like_a_bearer_token_writes_as_another_actor() {
    let keys = Keys::new();
    let issuer = Issuer::start(keys.jwks()).await;
    let dir = data_dir();
    let server = Server::start(dir.path(), &issuer).await;
    let forged = jwt(&keys.rsa, Some("rsa-1"), &claims(&issuer.url, "default"));
    for (bearer, text) in [
        (STATIC_TOKEN.to_string(), "written with the shared token"),
        (forged, "written with a token whose sub is default"),
    ] {
        let answer = server
            .call(
                Some(&bearer),
                "sequentialthinking",
                thought(1, 1, false, text),
            )
            .await;
        assert!(answer.succeeded(), "{} {}", answer.status, answer.body);
    }
    let output = std::process::Command::new(bin())
        .arg("--data-dir")
        .arg(dir.path())
        .args(["export", "--all", "-f", "jsonl"])
        .env_remove("REASONING_LEDGER_STORE")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut actors: Vec<(String, String)> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["payload"]["thought"].is_string())
        .map(|event| {
            (
                event["payload"]["thought"].as_str().unwrap().to_string(),
                event["actor"].as_str().unwrap_or("(none)").to_string(),
            )
        })
        .collect();
    actors.sort();
    assert_eq!(
        actors,
        [
            (
                "written with a token whose sub is default".into(),
                "oauth:default".into()
            ),
            ("written with the shared token".into(), "default".into()),
        ]
    );
    // `import` says whose events a file brings in (a file's actors are only its claim).
    let backup = dir.path().join("all.jsonl");
    std::fs::write(&backup, &output.stdout).unwrap();
    let other = data_dir();
    let imported = std::process::Command::new(bin())
        .arg("--data-dir")
        .arg(other.path())
        .arg("import")
        .arg(&backup)
        .env_remove("REASONING_LEDGER_STORE")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&imported.stderr);
    assert!(imported.status.success(), "{said}");
    assert!(
        said.contains("imported events written by: default (2), oauth:default (2)")
            || said.contains("imported events written by: oauth:default (2), default (2)"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_protected_resource_metadata_is_public_and_names_the_issuer() {
    let keys = Keys::new();
    let issuer = Issuer::start(keys.jwks()).await;
    let dir = data_dir();
    let server = Server::start(dir.path(), &issuer).await;
    let expected = json!({
        "resource": AUDIENCE,
        "authorization_servers": [issuer.url],
        "bearer_methods_supported": ["header"],
        "resource_name": "reasoning-ledger",
    });
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let response = reqwest::get(format!("{}{path}", server.base))
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], "application/json");
        assert_eq!(response.headers()["access-control-allow-origin"], "*");
        let document: Value = response.json().await.unwrap();
        assert_eq!(document, expected, "{path}");
    }
    let response = reqwest::Client::new()
        .post(format!(
            "{}/.well-known/oauth-protected-resource",
            server.base
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 405);
    let response = reqwest::get(format!(
        "{}/.well-known/oauth-protected-resource/other",
        server.base
    ))
    .await
    .unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_kid_refreshes_the_keys_once_and_a_rotated_key_gets_in() {
    let keys = Keys::new();
    let issuer = Issuer::start(keys.jwks()).await;
    let dir = data_dir();
    let server = Server::start(dir.path(), &issuer).await;
    assert_eq!(issuer.fetches(), 1);

    // The issuer rotates: a new key, the old RSA key withdrawn.
    let rotated = Key::ec();
    *issuer.jwks.lock().unwrap() = json!({"keys": [rotated.jwk("ec-2"), keys.ec.jwk("ec-1")]});
    let token = jwt(&rotated, Some("ec-2"), &claims(&issuer.url, "ann"));
    let answer = server
        .call(
            Some(&token),
            "sequentialthinking",
            thought(1, 1, false, "a rotated key"),
        )
        .await;
    assert!(answer.succeeded(), "{} {}", answer.status, answer.body);
    assert_eq!(issuer.fetches(), 2, "one refresh for the unknown kid");
    let old = jwt(&keys.rsa, Some("rsa-1"), &claims(&issuer.url, "ann"));
    let answer = server
        .call(
            Some(&old),
            "sequentialthinking",
            thought(1, 1, false, "a withdrawn key"),
        )
        .await;
    assert_eq!(
        answer.status, 401,
        "the withdrawn key is gone with the refresh"
    );

    // A flood of made-up kids right after: refused, and the issuer is not asked again.
    for n in 0..20 {
        let token = jwt(
            &rotated,
            Some(&format!("made-up-{n}")),
            &claims(&issuer.url, "ann"),
        );
        let answer = server
            .call(
                Some(&token),
                "sequentialthinking",
                thought(1, 1, false, "flood"),
            )
            .await;
        assert_eq!(answer.status, 401);
        assert_eq!(
            answer.challenge.as_deref(),
            Some(refused_challenge("no key of the issuer matches the token").as_str())
        );
    }
    assert_eq!(issuer.fetches(), 2, "the flood fetched nothing");
    assert_eq!(server.session_count().await, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_static_token_works_beside_oauth() {
    let keys = Keys::new();
    let issuer = Issuer::start(keys.jwks()).await;
    let dir = data_dir();
    let server = Server::start(dir.path(), &issuer).await;
    let answer = server
        .call(
            Some(STATIC_TOKEN),
            "sequentialthinking",
            thought(1, 1, false, "static"),
        )
        .await;
    assert!(answer.succeeded(), "{} {}", answer.status, answer.body);
    assert_eq!(server.session_count().await, 1);
}

/// Runs `serve` with `args` to its exit (it must fail) and returns its stderr.
async fn failed_start(dir: &Path, args: &[&str]) -> String {
    let output = tokio::time::timeout(
        PATIENCE,
        tokio::process::Command::new(bin())
            .arg("serve")
            .arg("--data-dir")
            .arg(dir)
            .args(args)
            .env("REASONING_LEDGER_TOKEN", STATIC_TOKEN)
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .expect("the server stops in time")
    .unwrap();
    assert!(!output.status.success(), "{args:?} started");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_oauth_settings_stop_the_server_at_start() {
    let dir = data_dir();
    let http = ["--http", "127.0.0.1:0"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "--oauth-issuer",
                "http://auth.example/",
                "--oauth-audience",
                AUDIENCE,
            ],
            "--oauth-issuer http://auth.example/: must be https (plain http only to a loopback address)",
        ),
        (
            vec![
                "--oauth-issuer",
                "https://auth.example/",
                "--oauth-audience",
                "ledger",
            ],
            "--oauth-audience ledger: not an absolute URL",
        ),
        (
            vec![
                "--oauth-issuer",
                "http://127.0.0.1:1/realms/test",
                "--oauth-audience",
                AUDIENCE,
            ],
            "cannot find the signing keys of the issuer http://127.0.0.1:1/realms/test",
        ),
        (
            vec!["--oauth-issuer", "https://auth.example/"],
            "--oauth-audience",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = http.iter().copied().chain(args).collect();
        let stderr = failed_start(dir.path(), &args).await;
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let stderr = failed_start(
        dir.path(),
        &[
            "--oauth-issuer",
            "https://auth.example/",
            "--oauth-audience",
            AUDIENCE,
        ],
    )
    .await;
    assert!(stderr.contains("--http"), "{stderr}");

    // An issuer whose JWKS holds no key this server verifies with.
    let issuer = Issuer::start(json!({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]})).await;
    let mut args = http.to_vec();
    args.extend([
        "--oauth-issuer",
        issuer.url.as_str(),
        "--oauth-audience",
        AUDIENCE,
    ]);
    let stderr = failed_start(dir.path(), &args).await;
    assert!(
        stderr.contains("has no key this server verifies with"),
        "{stderr}"
    );
}
