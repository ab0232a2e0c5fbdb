//! `serve --http … --oauth-issuer URL --oauth-audience URL`: an OAuth 2.1 resource server
//! as the MCP authorization spec describes (RFC 9728 metadata, RFC 6750 bearer tokens,
//! RFC 8707 audiences).
//!
//! Owns: the settings (checked once at start: an https issuer, or http on loopback; the
//! audience is this server's canonical URL), the protected-resource metadata document at
//! [`WELL_KNOWN_PATH`] (and its path-suffixed form), the `WWW-Authenticate` challenge of a
//! 401, and checking a JWT access token: an allow-listed asymmetric algorithm (never
//! `none` or HMAC), a signature by a key of the issuer's JWKS ([`jwks`]), `iss`, `aud`
//! (a string or an array), `exp` and `nbf` within [`CLOCK_SKEW_LEEWAY_SECS`]. A good
//! token's `sub` (else `name`), behind [`OAUTH_ACTOR_PREFIX`], is the actor the request
//! writes as: never a bearer token's name.
//! Must not: accept a token it could not verify, use any key but the issuer's, or log a
//! token.
//!
//! Beside the static bearer token: `http/mod.rs` asks [`auth`](super::auth) first (a
//! constant-time comparison) and, when that token does not match, [`OAuth::admit`].

mod jwks;
mod ring_provider;

use super::{Body, MCP_PATH};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, Response, StatusCode, header};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use reqwest::Url;

/// Where the protected-resource metadata is served (RFC 9728 §3); also with the
/// resource's path appended (`…/mcp`).
pub(crate) const WELL_KNOWN_PATH: &str = "/.well-known/oauth-protected-resource";

/// How far `exp` and `nbf` may be off (clocks of the issuer and this host differ).
pub(crate) const CLOCK_SKEW_LEEWAY_SECS: u64 = 60;

/// The longest bearer credential tried as a JWT.
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The longest actor name (`sub` or `name`) taken from a token, in characters.
pub(crate) const MAX_ACTOR_CHARS: usize = 256;

/// What an OAuth subject is recorded behind (`oauth:<sub>`): bearer token names cannot
/// hold a `:` (`tokens::valid_name`), so a token whose `sub` is `default` or a named
/// token's name never writes as that token's holder.
pub(crate) const OAUTH_ACTOR_PREFIX: &str = "oauth:";

/// How long clients may cache the metadata document.
const METADATA_MAX_AGE_SECS: u32 = 3600;

/// `--oauth-issuer` and `--oauth-audience`.
#[derive(Clone, Debug)]
pub(crate) struct OAuthSettings {
    /// The issuer exactly as its tokens' `iss` says (Auth0's ends with `/`).
    pub issuer: String,
    /// This server's canonical URL as clients reach it (`https://host/mcp`): the
    /// `resource` of the metadata, and what a token's `aud` must contain.
    pub audience: String,
}

/// Why OAuth could not start, or why a token is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OAuthError {
    #[error("--oauth-issuer {issuer}: {reason}")]
    IssuerSetting {
        issuer: String,
        reason: &'static str,
    },
    #[error("--oauth-audience {audience}: {reason}")]
    AudienceSetting {
        audience: String,
        reason: &'static str,
    },
    #[error("cannot find the signing keys of the issuer {issuer}: {reason}")]
    Discovery { issuer: String, reason: String },
    #[error(
        "{jwks_uri} has no key this server verifies with (RSA, EC P-256 or P-384, Ed25519 signature keys)"
    )]
    NoUsableKey { jwks_uri: String },
    #[error("fetching {url}: {reason}")]
    Fetch {
        url: String,
        reason: String,
        /// Whether the issuer's host answered at all (an HTTP status, a body).
        answered: bool,
    },
    #[error("the token is neither this server's bearer token nor a JWT")]
    Malformed,
    #[error("the token's algorithm is not accepted (RS, PS, ES256, ES384 and EdDSA are)")]
    Algorithm,
    #[error("no key of the issuer matches the token")]
    UnknownKey,
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token is from another issuer")]
    WrongIssuer,
    #[error("the token is for another audience")]
    WrongAudience,
    #[error("the token has no {0} claim")]
    MissingClaim(String),
    #[error("the token's {0} claim is malformed")]
    BadClaim(String),
    #[error("the token names no usable actor (sub or name)")]
    NoActor,
}

impl From<jsonwebtoken::errors::Error> for OAuthError {
    fn from(error: jsonwebtoken::errors::Error) -> Self {
        match error.into_kind() {
            ErrorKind::InvalidSignature => OAuthError::Signature,
            ErrorKind::ExpiredSignature => OAuthError::Expired,
            ErrorKind::ImmatureSignature => OAuthError::NotYetValid,
            ErrorKind::InvalidIssuer => OAuthError::WrongIssuer,
            ErrorKind::InvalidAudience => OAuthError::WrongAudience,
            ErrorKind::MissingRequiredClaim(claim) => OAuthError::MissingClaim(claim),
            ErrorKind::InvalidClaimFormat(claim) => OAuthError::BadClaim(claim),
            ErrorKind::InvalidAlgorithm
            | ErrorKind::UnsupportedAlgorithm
            | ErrorKind::MissingAlgorithm
            | ErrorKind::InvalidAlgorithmName => OAuthError::Algorithm,
            _ => OAuthError::Malformed,
        }
    }
}

/// The claims read besides those jsonwebtoken validates.
#[derive(serde::Deserialize)]
struct ActorClaims {
    sub: Option<String>,
    name: Option<String>,
}

/// The resource server: settings, metadata and the issuer's keys.
pub(crate) struct OAuth {
    issuer: String,
    /// `WWW-Authenticate`'s `resource_metadata`: the metadata URL of the audience.
    resource_metadata_url: String,
    /// Request paths the metadata is served at.
    metadata_paths: Vec<String>,
    metadata: Bytes,
    validation: Validation,
    keys: jwks::KeyCache,
}

/// `url` parsed, if it is https (or http on loopback) with no fragment, query or
/// credentials.
fn checked_url(text: &str) -> Result<Url, &'static str> {
    let url = Url::parse(text).map_err(|_| "not an absolute URL")?;
    if !jwks::secure_or_loopback(&url) {
        return Err("must be https (plain http only to a loopback address)");
    }
    if url.fragment().is_some() || url.query().is_some() {
        return Err("must have no query or fragment");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must carry no credentials");
    }
    Ok(url)
}

impl OAuthSettings {
    /// The issuer and audience URLs, or what is wrong with them.
    fn check(&self) -> Result<(Url, Url), OAuthError> {
        let issuer = checked_url(&self.issuer).map_err(|reason| OAuthError::IssuerSetting {
            issuer: self.issuer.clone(),
            reason,
        })?;
        let audience =
            checked_url(&self.audience).map_err(|reason| OAuthError::AudienceSetting {
                audience: self.audience.clone(),
                reason,
            })?;
        Ok((issuer, audience))
    }
}

impl OAuth {
    /// Checks the settings, finds the issuer's `jwks_uri` and fetches its keys: a wrong
    /// setting, an unreachable issuer or a JWKS without a usable key fails here, at start.
    pub(crate) async fn start(settings: OAuthSettings) -> Result<OAuth, OAuthError> {
        // The process's only jsonwebtoken provider; installing twice keeps the first.
        let _ = ring_provider::RING_PROVIDER.install_default();
        let (_, audience) = settings.check()?;
        let client = jwks::client();
        let jwks_uri = jwks::discover_jwks_uri(&client, &settings.issuer).await?;
        let keys = jwks::KeyCache::load(client, jwks_uri.clone()).await?;
        let oauth = OAuth::with_keys(settings, &audience, keys);
        eprintln!(
            "reasoning-ledger: OAuth access tokens from {} (keys: {jwks_uri}), metadata at {}",
            oauth.issuer, oauth.resource_metadata_url
        );
        Ok(oauth)
    }

    fn with_keys(settings: OAuthSettings, audience: &Url, keys: jwks::KeyCache) -> OAuth {
        let (metadata_paths, resource_metadata_url) = metadata_locations(audience);
        let metadata = serde_json::json!({
            "resource": settings.audience,
            "authorization_servers": [settings.issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "reasoning-ledger",
        });
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = CLOCK_SKEW_LEEWAY_SECS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[&settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        OAuth {
            issuer: settings.issuer,
            resource_metadata_url,
            metadata_paths,
            metadata: Bytes::from(metadata.to_string()),
            validation,
            keys,
        }
    }

    /// The actor of a JWT access token, or why it is refused.
    pub(crate) async fn authenticate(&self, bearer: &str) -> Result<String, OAuthError> {
        if bearer.len() > MAX_TOKEN_BYTES {
            return Err(OAuthError::Malformed);
        }
        let header = jsonwebtoken::decode_header(bearer).map_err(|error| match error.kind() {
            // `none`, HS* spelled oddly, or an algorithm jsonwebtoken does not know.
            ErrorKind::Json(_) if bearer.split('.').count() == 3 => OAuthError::Algorithm,
            _ => OAuthError::Malformed,
        })?;
        let algorithm = header.alg;
        if !ring_provider::verifies(algorithm) {
            return Err(OAuthError::Algorithm);
        }
        let kid = header.kid.as_deref();
        let fits = |key: &&jwks::VerifyKey| key.algorithms.contains(&algorithm);
        let mut keys = self.keys.keys(jwks::Need::Current).await;
        let named = |keys: &[jwks::VerifyKey]| {
            kid.is_none() || keys.iter().filter(fits).any(|k| k.kid.as_deref() == kid)
        };
        if !named(&keys) {
            keys = self.keys.keys(jwks::Need::UnknownKid).await;
        }
        let candidates: Vec<&jwks::VerifyKey> = if named(&keys) {
            keys.iter()
                .filter(fits)
                .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
                .collect()
        } else {
            // A JWKS whose keys carry no kid: any of them may have signed.
            keys.iter()
                .filter(fits)
                .filter(|k| k.kid.is_none())
                .collect()
        };
        let mut validation = self.validation.clone();
        validation.algorithms = vec![algorithm];
        let mut refusal = OAuthError::UnknownKey;
        for candidate in candidates {
            match jsonwebtoken::decode::<ActorClaims>(bearer, &candidate.key, &validation) {
                Ok(data) => return actor_of(data.claims),
                Err(error) => {
                    refusal = OAuthError::from(error);
                    if !matches!(refusal, OAuthError::Signature) {
                        return Err(refusal);
                    }
                }
            }
        }
        Err(refusal)
    }

    /// The request's actor if it carries a good access token, else the 401 to answer.
    pub(super) async fn admit<B>(&self, request: &Request<B>) -> Result<String, Response<Body>> {
        let Some(bearer) = bearer_of(request) else {
            return Err(self.unauthorized(None));
        };
        match self.authenticate(bearer).await {
            Ok(actor) => Ok(actor),
            Err(error) => {
                tracing::debug!(reason = %error, "an access token was refused");
                Err(self.unauthorized(Some(&error)))
            }
        }
    }

    /// The `WWW-Authenticate` value of a 401: where the metadata is, and with a refused
    /// token `error="invalid_token"` and why (RFC 6750 §3).
    pub(crate) fn challenge(&self, refused: Option<&OAuthError>) -> String {
        let mut value = format!(
            "Bearer resource_metadata=\"{}\"",
            self.resource_metadata_url
        );
        if let Some(error) = refused {
            let description = error.to_string().replace(['"', '\\'], "'");
            value.push_str(&format!(
                ", error=\"invalid_token\", error_description=\"{description}\""
            ));
        }
        value
    }

    /// A 401 with the challenge.
    pub(super) fn unauthorized(&self, refused: Option<&OAuthError>) -> Response<Body> {
        let reason = match refused {
            Some(error) => error.to_string(),
            None => "send Authorization: Bearer <token>".to_string(),
        };
        let text = format!(
            "unauthorized: {reason}; this server takes OAuth access tokens from {} \
             (metadata: {}) or its bearer token\n",
            self.issuer, self.resource_metadata_url
        );
        let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
        *response.status_mut() = StatusCode::UNAUTHORIZED;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, "text/plain".parse().expect("header"));
        if let Ok(value) = self.challenge(refused).parse() {
            headers.insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// The metadata document if the request asks for it (any origin may read it).
    pub(super) fn metadata_response<B>(&self, request: &Request<B>) -> Option<Response<Body>> {
        if !self
            .metadata_paths
            .iter()
            .any(|path| path == request.uri().path())
        {
            return None;
        }
        let (status, body) = match *request.method() {
            Method::GET => (StatusCode::OK, self.metadata.clone()),
            Method::HEAD => (StatusCode::OK, Bytes::new()),
            Method::OPTIONS => (StatusCode::NO_CONTENT, Bytes::new()),
            _ => (StatusCode::METHOD_NOT_ALLOWED, Bytes::new()),
        };
        let mut response = Response::new(Full::new(body).boxed());
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            "application/json".parse().expect("header"),
        );
        headers.insert(
            header::CACHE_CONTROL,
            format!("public, max-age={METADATA_MAX_AGE_SECS}")
                .parse()
                .expect("header"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            "*".parse().expect("header"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            "GET, HEAD, OPTIONS".parse().expect("header"),
        );
        if status == StatusCode::METHOD_NOT_ALLOWED {
            headers.insert(header::ALLOW, "GET, HEAD, OPTIONS".parse().expect("header"));
        }
        Some(response)
    }
}

/// The request paths the metadata is served at (the bare well-known path, with `/mcp`,
/// and with the audience's path), and its URL under the audience (RFC 9728 §3.1: the
/// well-known path inserted between the audience's host and path).
fn metadata_locations(audience: &Url) -> (Vec<String>, String) {
    let suffixed = format!("{WELL_KNOWN_PATH}{}", audience.path().trim_end_matches('/'));
    let mut paths = vec![
        WELL_KNOWN_PATH.to_string(),
        format!("{WELL_KNOWN_PATH}{MCP_PATH}"),
    ];
    if !paths.contains(&suffixed) {
        paths.push(suffixed.clone());
    }
    let url = format!("{}{suffixed}", audience.origin().ascii_serialization());
    (paths, url)
}

/// The first `Authorization: Bearer` credential of a request.
fn bearer_of<B>(request: &Request<B>) -> Option<&str> {
    request
        .headers()
        .get_all(header::AUTHORIZATION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| {
            let (scheme, credential) = value.trim().split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| credential.trim())
        })
}

/// `sub`, else `name`: trimmed, at most [`MAX_ACTOR_CHARS`], no control characters; behind
/// [`OAUTH_ACTOR_PREFIX`].
fn actor_of(claims: ActorClaims) -> Result<String, OAuthError> {
    [claims.sub, claims.name]
        .into_iter()
        .flatten()
        .map(|text| text.trim().to_string())
        .find(|text| !text.is_empty())
        .filter(|text| {
            text.chars().count() <= MAX_ACTOR_CHARS && !text.chars().any(char::is_control)
        })
        .map(|text| format!("{OAUTH_ACTOR_PREFIX}{text}"))
        .ok_or(OAuthError::NoActor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(issuer: &str, audience: &str) -> OAuthSettings {
        OAuthSettings {
            issuer: issuer.into(),
            audience: audience.into(),
        }
    }

    #[test]
    fn settings_need_https_except_on_loopback() {
        let good = [
            ("https://auth.example/", "https://ledger.example/mcp"),
            (
                "https://kc.example/realms/team",
                "https://ledger.example:8443/mcp",
            ),
            ("http://127.0.0.1:9000", "http://127.0.0.1:8765/mcp"),
            ("http://localhost:9000/", "http://[::1]:8765/mcp"),
        ];
        for (issuer, audience) in good {
            assert!(
                settings(issuer, audience).check().is_ok(),
                "{issuer} {audience}"
            );
        }
        let bad = [
            (
                "http://auth.example/",
                "https://ledger.example/mcp",
                "--oauth-issuer",
            ),
            (
                "auth.example",
                "https://ledger.example/mcp",
                "--oauth-issuer",
            ),
            ("https://auth.example/", "ledger", "--oauth-audience"),
            (
                "https://auth.example/",
                "http://ledger.example/mcp",
                "--oauth-audience",
            ),
            (
                "https://auth.example/#x",
                "https://ledger.example/mcp",
                "--oauth-issuer",
            ),
            (
                "https://u:p@auth.example/",
                "https://ledger.example/mcp",
                "--oauth-issuer",
            ),
        ];
        for (issuer, audience, flag) in bad {
            let error = settings(issuer, audience).check().unwrap_err().to_string();
            assert!(error.starts_with(flag), "{issuer} {audience}: {error}");
        }
    }

    #[test]
    fn the_metadata_is_where_the_audience_says() {
        let at = |audience: &str| metadata_locations(&Url::parse(audience).unwrap());
        assert_eq!(
            at("https://ledger.example/mcp"),
            (
                vec![
                    "/.well-known/oauth-protected-resource".to_string(),
                    "/.well-known/oauth-protected-resource/mcp".to_string(),
                ],
                "https://ledger.example/.well-known/oauth-protected-resource/mcp".to_string()
            )
        );
        // Behind a proxy that serves it under a prefix; on a port; at the root.
        let (paths, url) = at("https://example.com:8443/ledger/mcp");
        assert_eq!(
            url,
            "https://example.com:8443/.well-known/oauth-protected-resource/ledger/mcp"
        );
        assert!(paths.contains(&"/.well-known/oauth-protected-resource/ledger/mcp".to_string()));
        let (paths, url) = at("https://ledger.example/");
        assert_eq!(
            url,
            "https://ledger.example/.well-known/oauth-protected-resource"
        );
        assert_eq!(paths.len(), 2);
    }

    #[test]
    fn the_actor_is_sub_else_name_and_printable() {
        let claims = |sub: Option<&str>, name: Option<&str>| ActorClaims {
            sub: sub.map(String::from),
            name: name.map(String::from),
        };
        assert_eq!(
            actor_of(claims(Some("u-1"), Some("Ann"))).unwrap(),
            "oauth:u-1"
        );
        assert_eq!(
            actor_of(claims(Some(" "), Some("Ann"))).unwrap(),
            "oauth:Ann"
        );
        assert_eq!(actor_of(claims(None, Some("Ann"))).unwrap(), "oauth:Ann");
        // A bearer token's name as `sub` is still another actor.
        assert_eq!(
            actor_of(claims(Some("default"), None)).unwrap(),
            "oauth:default"
        );
        assert!(!crate::http::tokens::valid_name("oauth:default"));
        assert!(actor_of(claims(None, None)).is_err());
        assert!(actor_of(claims(Some("a\u{1b}[31m"), None)).is_err());
        assert!(actor_of(claims(Some(&"x".repeat(MAX_ACTOR_CHARS + 1)), None)).is_err());
    }

    #[test]
    fn no_refusal_breaks_the_challenge_quoting() {
        let refusals = [
            OAuthError::Malformed,
            OAuthError::Algorithm,
            OAuthError::UnknownKey,
            OAuthError::Signature,
            OAuthError::Expired,
            OAuthError::NotYetValid,
            OAuthError::WrongIssuer,
            OAuthError::WrongAudience,
            OAuthError::MissingClaim("exp".into()),
            OAuthError::BadClaim("a\"b".into()),
            OAuthError::NoActor,
        ];
        for refusal in refusals {
            let text = refusal.to_string().replace(['"', '\\'], "'");
            assert!(!text.contains('"') && text.is_ascii(), "{text}");
        }
    }
}
