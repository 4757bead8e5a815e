//! Traces across processes: an OTLP/HTTP receiver in the test ([`Collector`]) that the chain's
//! services export their spans to, as a service exports to a collector in production; the
//! origin of each trace ([`Origin`]: a root span in the test process, whose `traceparent` the
//! first message carries); and the tree of a trace, rendered for a reader ([`render`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::trace::{Span as _, Tracer as _, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use prost::Message as _;

use inboxed_core::trace::TraceContext;

/// The environment variable that tells a service process where to export its spans.
pub const OTLP_ENV: &str = "INBOXED_TEST_OTLP";
/// The environment variable that names a service process in its spans (`service.name`).
pub const SERVICE_ENV: &str = "INBOXED_TEST_SERVICE";

/// One span as it arrived over OTLP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The `service.name` of the process that exported it.
    pub service: String,
    /// Hex.
    pub trace_id: String,
    /// Hex.
    pub span_id: String,
    /// Hex; `None` for a root.
    pub parent_id: Option<String>,
    /// The OpenTelemetry name (`process`, `create orders`).
    pub name: String,
    /// `producer`, `consumer`, `internal`, …
    pub kind: &'static str,
    /// The `(trace id, span id)` of each link.
    pub links: Vec<(String, String)>,
    /// Attributes, values as text.
    pub attributes: BTreeMap<String, String>,
}

impl Span {
    /// An attribute's value.
    #[must_use]
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// An OTLP/HTTP (protobuf) trace receiver on a loopback port, on a thread of its own (so that
/// a test blocked on a flush does not hold it up).
#[derive(Debug)]
pub struct Collector {
    endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Collector {
    /// Starts the receiver.
    ///
    /// # Panics
    /// When no port can be bound.
    #[must_use]
    pub fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
        listener.set_nonblocking(true).expect("nonblocking");
        let endpoint = format!(
            "http://{}/v1/traces",
            listener.local_addr().expect("address")
        );
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&spans);
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let app = axum::Router::new().route(
                    "/v1/traces",
                    axum::routing::post(move |body: axum::body::Bytes| {
                        let kept = Arc::clone(&kept);
                        async move {
                            let request = ExportTraceServiceRequest::decode(body)
                                .expect("an OTLP trace export");
                            kept.lock().expect("spans").extend(spans_of(request));
                            (
                                [("content-type", "application/x-protobuf")],
                                ExportTraceServiceResponse::default().encode_to_vec(),
                            )
                        }
                    }),
                );
                axum::serve(listener, app).await.expect("serve");
            });
        });
        Self { endpoint, spans }
    }

    /// Where a service exports to: the value of [`OTLP_ENV`].
    #[must_use]
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Every span received so far.
    ///
    /// # Panics
    /// When a receiving thread panicked.
    #[must_use]
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().expect("spans").clone()
    }

    /// Waits until `done` holds of the spans received, for at most `within`.
    ///
    /// # Panics
    /// When it does not, with the spans received.
    pub async fn wait_until(&self, within: Duration, done: impl Fn(&[Span]) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + within;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "the spans expected did not arrive within {within:?}; received:\n{spans:#?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn hex_id(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn spans_of(request: ExportTraceServiceRequest) -> Vec<Span> {
    let mut out = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .map(|kv| text(kv.value.as_ref()))
            .unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            let kind = match span.kind {
                1 => "internal",
                2 => "server",
                3 => "client",
                4 => "producer",
                5 => "consumer",
                _ => "unspecified",
            };
            out.push(Span {
                service: service.clone(),
                trace_id: hex_id(&span.trace_id),
                span_id: hex_id(&span.span_id),
                parent_id: (!span.parent_span_id.is_empty()).then(|| hex_id(&span.parent_span_id)),
                name: span.name,
                kind,
                links: span
                    .links
                    .iter()
                    .map(|l| (hex_id(&l.trace_id), hex_id(&l.span_id)))
                    .collect(),
                attributes: span
                    .attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
                    .collect(),
            });
        }
    }
    out
}

/// A tracer provider exporting over OTLP to `endpoint` as `service`, in batches every
/// 100 ms (a service process is killed at the end of a test, not shut down: what it ended
/// reaches the receiver within a batch's delay).
///
/// # Panics
/// When the exporter cannot be built.
#[must_use]
pub fn provider(endpoint: &str, service: &str) -> SdkTracerProvider {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(endpoint)
        .build()
        .expect("an OTLP exporter");
    let batches = BatchConfigBuilder::default()
        .with_scheduled_delay(Duration::from_millis(100))
        .build();
    SdkTracerProvider::builder()
        .with_span_processor(
            BatchSpanProcessor::builder(exporter)
                .with_batch_config(batches)
                .build(),
        )
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service.to_owned())
                .build(),
        )
        .build()
}

/// In a service process started with [`OTLP_ENV`]: sends its `tracing` spans, through
/// `tracing-opentelemetry`, to the test's collector, as [`SERVICE_ENV`] names it. Returns the
/// provider, to keep.
#[must_use]
pub fn export_from_env() -> Option<SdkTracerProvider> {
    use tracing_subscriber::layer::SubscriberExt as _;
    let endpoint = std::env::var(OTLP_ENV).ok()?;
    let service = std::env::var(SERVICE_ENV).unwrap_or_else(|_| "service".to_owned());
    let provider = provider(&endpoint, &service);
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("inboxed-test"));
    let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer));
    Some(provider)
}

/// Where traces start: root spans exported to the collector as service `origin`.
#[derive(Debug)]
pub struct Origin {
    provider: SdkTracerProvider,
}

impl Origin {
    /// Exports to `collector`.
    #[must_use]
    pub fn new(collector: &Collector) -> Self {
        Self {
            provider: provider(collector.endpoint(), "origin"),
        }
    }

    /// Starts and ends a root span named `name`; the context a first message carries.
    ///
    /// # Panics
    /// When the span's context is not a W3C traceparent.
    #[must_use]
    pub fn root(&self, name: &'static str) -> TraceContext {
        let tracer = self.provider.tracer("inboxed-test");
        let span = tracer.start(name);
        let context = span.span_context().clone();
        drop(span);
        let traceparent = format!(
            "00-{}-{}-{:02x}",
            context.trace_id(),
            context.span_id(),
            context.trace_flags().to_u8()
        );
        TraceContext::parse(&traceparent).expect("a traceparent")
    }

    /// Exports what has ended: call before waiting for the roots at the collector.
    ///
    /// # Panics
    /// When the flush fails.
    pub fn flush(&self) {
        self.provider
            .force_flush()
            .expect("flush the origin's spans");
    }
}

/// The spans of `trace_id` as a tree, indented by parent, each with its service and its
/// links (a link's span named when it is in `spans`).
#[must_use]
pub fn render(spans: &[Span], trace_id: &str) -> String {
    let of_trace: Vec<&Span> = spans.iter().filter(|s| s.trace_id == trace_id).collect();
    let ids: std::collections::HashSet<&str> =
        of_trace.iter().map(|s| s.span_id.as_str()).collect();
    let mut out = format!("trace {trace_id}\n");
    let roots = of_trace
        .iter()
        .filter(|s| s.parent_id.as_deref().is_none_or(|p| !ids.contains(p)));
    for root in roots {
        walk(&mut out, spans, &of_trace, root, 1);
    }
    // Spans of other traces that link into this one: the relays' publishes.
    let linking: Vec<&Span> = spans
        .iter()
        .filter(|s| s.trace_id != trace_id && s.links.iter().any(|(t, _)| t == trace_id))
        .collect();
    if !linking.is_empty() {
        out.push_str("linked from other traces\n");
        for span in linking {
            walk(&mut out, spans, &[], span, 1);
        }
    }
    out
}

fn walk(out: &mut String, all: &[Span], of_trace: &[&Span], span: &Span, depth: usize) {
    let _ = write!(
        out,
        "{}{} [{}, {}] {}",
        "  ".repeat(depth),
        span.name,
        span.service,
        span.kind,
        &span.span_id
    );
    for (_, linked) in &span.links {
        let name = all
            .iter()
            .find(|s| &s.span_id == linked)
            .map_or_else(|| "?".to_owned(), |s| format!("{} [{}]", s.name, s.service));
        let _ = write!(out, " (links to {name} {linked})");
    }
    out.push('\n');
    for child in of_trace
        .iter()
        .filter(|s| s.parent_id.as_deref() == Some(span.span_id.as_str()))
    {
        walk(out, all, of_trace, child, depth + 1);
    }
}
