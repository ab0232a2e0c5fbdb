//! What an operator (a load balancer, Kubernetes, Prometheus) asks `serve --http`:
//! `GET /healthz`, `GET /readyz`, `GET /metrics`, and the request id each request is
//! logged under.
//!
//! Owns: the probe paths and answers (`/healthz`: the process answers; `/readyz`: the store
//! answers a cheap read within [`READY_TIMEOUT`], else 503), the `/metrics` answer, and
//! [`RequestId`] (one per HTTP request, echoed in `x-request-id`, found again by tool
//! routing through rmcp's copy of the request parts). Must not: reveal anything in a probe
//! answer (no store, version or error text), or require the token for a probe (the caller
//! decides for `/metrics`).

use super::{Body, plain};
use crate::store::Ledger;
use hyper::{Response, StatusCode};
use std::time::Duration;

/// Liveness: answers 200 while the process serves.
pub(crate) const HEALTH_PATH: &str = "/healthz";
/// Readiness: 200 while the store answers, 503 otherwise.
pub(crate) const READY_PATH: &str = "/readyz";
/// Prometheus text.
pub(crate) const METRICS_PATH: &str = "/metrics";

/// Longest `/readyz` waits for the store's answer before saying 503.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// Response header carrying the request's id.
pub(crate) const REQUEST_ID_HEADER: &str = "x-request-id";

/// One HTTP request's id (a ULID), in the request's extensions.
#[derive(Clone, Debug)]
pub(crate) struct RequestId(pub String);

impl RequestId {
    pub(super) fn new() -> RequestId {
        RequestId(ulid::Ulid::generate().to_string())
    }
}

/// The id to log a tool call under: its HTTP request's, else (stdio) its JSON-RPC id.
pub(crate) fn request_id(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> String {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<RequestId>())
        .map_or_else(|| context.id.to_string(), |id| id.0.clone())
}

pub(super) fn health() -> Response<Body> {
    plain(StatusCode::OK, "ok\n")
}

/// 200 if the store answers a cheap read within [`READY_TIMEOUT`], else 503.
pub(super) async fn ready(ledger: &Ledger) -> Response<Body> {
    let ledger = ledger.clone();
    let read = tokio::task::spawn_blocking(move || ledger.last_position());
    match tokio::time::timeout(READY_TIMEOUT, read).await {
        Ok(Ok(Ok(_))) => plain(StatusCode::OK, "ready\n"),
        Ok(Ok(Err(error))) => {
            tracing::warn!(%error, "not ready: the store does not answer");
            plain(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
        }
        Ok(Err(_)) | Err(_) => {
            tracing::warn!("not ready: the store did not answer in time");
            plain(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
        }
    }
}

pub(super) fn metrics(open_connections: usize) -> Response<Body> {
    use http_body_util::{BodyExt, Full};
    let text = super::metrics::install().render(open_connections);
    let mut response = Response::new(Full::new(bytes::Bytes::from(text)).boxed());
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(super::metrics::METRICS_CONTENT_TYPE),
    );
    response
}
