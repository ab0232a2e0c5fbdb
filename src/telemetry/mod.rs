//! OpenTelemetry traces: live spans of `serve`'s calls, and past sessions sent as traces.
//!
//! Owns: reading the standard `OTEL_*` variables ([`Settings::from_env`]), the process's
//! one exporter (OTLP/HTTP through `opentelemetry-otlp`, protobuf or JSON) behind a
//! batch processor with a bounded queue ([`start`], [`Exporting`]), what it dropped
//! ([`dropped_spans`], shown by `/metrics`), the span of one MCP request ([`call`]), how an
//! event becomes span attributes ([`events`]) and a recorded session a trace ([`past`]).
//!
//! Must not: do anything when no endpoint is configured (no thread, no exporter, no span
//! built: [`enabled`] is one atomic load, checked before anything is made); make a call
//! wait on the collector (spans are queued with a non-blocking send and exported by the
//! processor's own thread; a full queue drops); write to stdout; put thought text in a
//! span unless [`CAPTURE_CONTENT_ENV`] says `true`; name a family (the one payload it
//! reads, a model call's record, is the provider's).

pub(crate) mod call;
pub(crate) mod events;
pub(crate) mod past;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor,
};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// The collector's base URL (`/v1/traces` is appended).
pub(crate) const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The traces URL, used as it is.
pub(crate) const TRACES_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `true`: no telemetry whatever else is set.
pub(crate) const SDK_DISABLED_ENV: &str = "OTEL_SDK_DISABLED";
/// `none`: no trace exporter whatever else is set.
pub(crate) const TRACES_EXPORTER_ENV: &str = "OTEL_TRACES_EXPORTER";
/// `http/protobuf` (the default) or `http/json`.
pub(crate) const PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// The traces' own protocol, before [`PROTOCOL_ENV`].
pub(crate) const TRACES_PROTOCOL_ENV: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
/// `true`: spans carry the text of what is recorded (thoughts, answers, titles).
pub(crate) const CAPTURE_CONTENT_ENV: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// The `service.name` spans carry when neither `OTEL_SERVICE_NAME` nor
/// `OTEL_RESOURCE_ATTRIBUTES` names one.
pub(crate) const DEFAULT_SERVICE_NAME: &str = "reasoning-ledger";

/// Most finished spans waiting for the exporter: beyond it a span is dropped (and
/// counted), never waited for. About 2 MB of spans at most.
pub(crate) const MAX_QUEUED_SPANS: usize = 2_048;

/// Most spans one export request carries.
pub(crate) const MAX_EXPORT_BATCH: usize = 512;

/// How long a finished span may wait before its batch is sent (a quiet server's spans
/// reach the collector this late at most).
pub(crate) const EXPORT_DELAY: Duration = Duration::from_millis(500);

/// How long one export request may take before it is given up (its spans counted as
/// dropped): a hung collector holds the exporter's thread this long per batch, never a
/// call.
pub(crate) const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long stopping waits for the queued spans to be sent; what is left then is lost.
pub(crate) const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(3);

/// What telemetry was asked for, read once from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Settings {
    pub protocol: Protocol,
    /// Thought text in spans ([`CAPTURE_CONTENT_ENV`]).
    pub capture_content: bool,
    /// No `OTEL_SERVICE_NAME` or `service.name` in `OTEL_RESOURCE_ATTRIBUTES`.
    pub default_service_name: bool,
}

/// Why telemetry could not start or a session could not be sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TelemetryError {
    #[error(
        "no OpenTelemetry endpoint is configured: set {ENDPOINT_ENV} (for example \
         http://localhost:4318) or {TRACES_ENDPOINT_ENV}"
    )]
    NotConfigured,
    #[error("telemetry is off: {SDK_DISABLED_ENV}=true or {TRACES_EXPORTER_ENV}=none")]
    Disabled,
    #[error("{var}={value:?}: only http/protobuf and http/json are supported")]
    Protocol { var: &'static str, value: String },
    #[error("building the OTLP exporter: {0}")]
    Build(String),
    #[error("sending spans to the collector: {0}")]
    Export(String),
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn is_true(name: &str) -> bool {
    var(name).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

impl Settings {
    /// The settings the environment asks for; [`TelemetryError::NotConfigured`] or
    /// [`TelemetryError::Disabled`] when it asks for none.
    pub(crate) fn from_env() -> Result<Settings, TelemetryError> {
        if var(ENDPOINT_ENV).is_none() && var(TRACES_ENDPOINT_ENV).is_none() {
            return Err(TelemetryError::NotConfigured);
        }
        if is_true(SDK_DISABLED_ENV)
            || var(TRACES_EXPORTER_ENV).is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
        {
            return Err(TelemetryError::Disabled);
        }
        let (name, value) = match var(TRACES_PROTOCOL_ENV) {
            Some(value) => (TRACES_PROTOCOL_ENV, Some(value)),
            None => (PROTOCOL_ENV, var(PROTOCOL_ENV)),
        };
        let protocol = match value.as_deref().map(str::trim) {
            None | Some("http/protobuf") => Protocol::HttpBinary,
            Some("http/json") => Protocol::HttpJson,
            Some(other) => {
                return Err(TelemetryError::Protocol {
                    var: name,
                    value: other.to_string(),
                });
            }
        };
        let default_service_name = var("OTEL_SERVICE_NAME").is_none()
            && !var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|v| v.contains("service.name="));
        Ok(Settings {
            protocol,
            capture_content: is_true(CAPTURE_CONTENT_ENV),
            default_service_name,
        })
    }

    /// The resource every span of this process carries.
    fn resource(&self) -> Resource {
        let builder = Resource::builder()
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_attribute(opentelemetry::KeyValue::new(
                "telemetry.sdk.language",
                "rust",
            ));
        if self.default_service_name {
            builder.with_service_name(DEFAULT_SERVICE_NAME).build()
        } else {
            builder.build()
        }
    }

    /// The OTLP/HTTP exporter the environment names (endpoint, headers, timeout are
    /// read by the exporter itself).
    fn exporter(&self) -> Result<opentelemetry_otlp::SpanExporter, TelemetryError> {
        let timeout = var("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_TIMEOUT"))
            .and_then(|ms| ms.trim().parse().ok())
            .map_or(EXPORT_TIMEOUT, Duration::from_millis);
        // reqwest is built without a TLS provider of its own: ring, as everywhere here
        // (an https collector).
        let _ = rustls::crypto::ring::default_provider().install_default();
        opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(self.protocol)
            .with_timeout(timeout)
            .build()
            .map_err(|e| TelemetryError::Build(e.to_string()))
    }
}

/// What the exporter did: spans waiting, spans dropped (queue full, or their export
/// failed), spans sent.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pending: AtomicUsize,
    dropped: AtomicU64,
    sent: AtomicU64,
}

/// The exporter, counting what it sends and what it fails to. Built on the batch
/// processor's thread at its first export, not at start: its HTTP client (a runtime
/// thread, the system's TLS roots) cost a start about 6 ms.
#[derive(Debug)]
struct Counted {
    settings: Settings,
    inner: OnceLock<Option<opentelemetry_otlp::SpanExporter>>,
    /// The resource the provider gave before the exporter was built.
    resource: std::sync::Mutex<Option<Resource>>,
    stats: Arc<Stats>,
}

impl Counted {
    /// The exporter, built the first time it is needed (`None`: it could not be, said once).
    fn exporter(&self) -> Option<&opentelemetry_otlp::SpanExporter> {
        self.inner
            .get_or_init(|| match self.settings.exporter() {
                Ok(mut exporter) => {
                    let resource = self.resource.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(resource) = resource.as_ref() {
                        exporter.set_resource(resource);
                    }
                    Some(exporter)
                }
                Err(error) => {
                    tracing::warn!(%error, "telemetry: spans cannot be sent");
                    None
                }
            })
            .as_ref()
    }
}

impl SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let count = batch.len();
        let result = match self.exporter() {
            Some(exporter) => exporter.export(batch).await,
            None => Err(opentelemetry_sdk::error::OTelSdkError::InternalFailure(
                "no exporter".into(),
            )),
        };
        self.stats.pending.fetch_sub(count, Ordering::Relaxed);
        match &result {
            Ok(()) => self.stats.sent.fetch_add(count as u64, Ordering::Relaxed),
            Err(_) => self
                .stats
                .dropped
                .fetch_add(count as u64, Ordering::Relaxed),
        };
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        match self.inner.get() {
            Some(Some(exporter)) => exporter.shutdown_with_timeout(timeout),
            _ => Ok(()),
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        match self.inner.get() {
            Some(Some(exporter)) => exporter.force_flush(),
            _ => Ok(()),
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        match self.inner.get_mut() {
            Some(Some(exporter)) => exporter.set_resource(resource),
            _ => {
                *self.resource.get_mut().unwrap_or_else(|p| p.into_inner()) =
                    Some(resource.clone());
            }
        }
    }
}

/// The batch processor behind a bound of its own: a span finds room among
/// [`MAX_QUEUED_SPANS`] (queued or being exported) or is dropped and counted, so the
/// processor's own queue never fills and every drop is seen.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    stats: Arc<Stats>,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if self.stats.pending.fetch_add(1, Ordering::Relaxed) >= MAX_QUEUED_SPANS {
            self.stats.pending.fetch_sub(1, Ordering::Relaxed);
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The live exporter of a `serve` process.
pub(crate) struct Exporting {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    stats: Arc<Stats>,
    capture_content: bool,
}

/// The process's exporter, once [`start`] made one (never, without an endpoint).
static EXPORTING: OnceLock<Exporting> = OnceLock::new();

/// The running exporter, if any: one atomic load, what the request path checks first.
pub(crate) fn exporting() -> Option<&'static Exporting> {
    EXPORTING.get()
}

/// Whether live spans are being made.
pub(crate) fn enabled() -> bool {
    EXPORTING.get().is_some()
}

/// Spans dropped so far (queue full, or their export failed); 0 without an exporter.
pub(crate) fn dropped_spans() -> u64 {
    EXPORTING
        .get()
        .map_or(0, |e| e.stats.dropped.load(Ordering::Relaxed))
}

/// Spans the collector accepted so far; 0 without an exporter.
pub(crate) fn sent_spans() -> u64 {
    EXPORTING
        .get()
        .map_or(0, |e| e.stats.sent.load(Ordering::Relaxed))
}

/// Stops the exporter when dropped: sends what is queued within [`SHUTDOWN_DEADLINE`].
pub(crate) struct Guard(());

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(exporting) = EXPORTING.get()
            && let Err(error) = exporting.provider.shutdown_with_timeout(SHUTDOWN_DEADLINE)
        {
            tracing::warn!(%error, "telemetry: spans still queued at shutdown were lost");
        }
    }
}

/// Starts the live exporter when the environment configures one (`serve`): `None`, and
/// nothing made, when it does not. Call it outside the async runtime (the exporter's
/// HTTP client blocks on a thread of its own).
pub(crate) fn start() -> Option<Guard> {
    let settings = match Settings::from_env() {
        Ok(settings) => settings,
        Err(TelemetryError::NotConfigured | TelemetryError::Disabled) => return None,
        Err(error) => {
            tracing::warn!(%error, "telemetry: not exporting");
            return None;
        }
    };
    let stats = Arc::new(Stats::default());
    let exporter = Counted {
        settings: settings.clone(),
        inner: OnceLock::new(),
        resource: std::sync::Mutex::new(None),
        stats: stats.clone(),
    };
    let batch = BatchConfigBuilder::default()
        // Room beyond our own bound: the processor's queue never refuses a span.
        .with_max_queue_size(MAX_QUEUED_SPANS + 1)
        .with_max_export_batch_size(MAX_EXPORT_BATCH)
        .with_scheduled_delay(EXPORT_DELAY)
        .build();
    let processor = Bounded {
        inner: BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch)
            .build(),
        stats: stats.clone(),
    };
    // The sampler is the SDK's default: OTEL_TRACES_SAMPLER (and _ARG), else
    // parentbased_always_on.
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(settings.resource())
        .build();
    let tracer = provider.tracer("reasoning-ledger");
    let exporting = Exporting {
        provider,
        tracer,
        stats,
        capture_content: settings.capture_content,
    };
    if EXPORTING.set(exporting).is_err() {
        return None;
    }
    tracing::info!("telemetry: exporting traces over OTLP/HTTP");
    Some(Guard(()))
}

/// Runs `future` to its end on this thread (the CLI's one export; no runtime needed).
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}
