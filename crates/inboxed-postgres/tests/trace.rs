//! W3C trace context with the `otel` feature, on PostgreSQL, read back from OpenTelemetry's
//! in-memory exporter: processing a message (by a processor, or by a worker from its stored
//! row) continues the trace the message carries, and an outbox write in its handler stores
//! the processing span's context, so the next service continues the same trace.

use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::outbox::{Outbox, OutgoingMessage};
use inboxed_core::trace::TraceContext;
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Headers, MessageId, Processor};
use inboxed_postgres::PgStore;
use inboxed_test::{Backend, Pg};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use sqlx::{PgConnection, Postgres};
use tracing_subscriber::layer::SubscriberExt as _;

const SENDER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Writes one outgoing message caused by each message it handles.
struct Announcing {
    outbox: Outbox<PgStore>,
}

impl Handler<Postgres> for Announcing {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        let event = OutgoingMessage::new("announced", msg.payload().to_vec()).caused_by(msg);
        self.outbox.write(conn, &event).await?;
        Ok(())
    }
}

/// Spans recorded while the returned guard lives (on this thread: the tests run on a
/// current-thread runtime), exported to `exporter` as each ends.
fn record(
    exporter: &InMemorySpanExporter,
) -> (SdkTracerProvider, tracing::subscriber::DefaultGuard) {
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("inboxed-test"));
    let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    (provider, guard)
}

fn span<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        panic!(
            "no span {name} in {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    })
}

/// The trace context stored with the only outbox row.
async fn stored_trace(db: &inboxed_test::TestDb<Pg>) -> TraceContext {
    let headers: String = sqlx::query_scalar("SELECT headers::text FROM inboxed_outbox_messages")
        .fetch_one(db.store.pool())
        .await
        .unwrap();
    let headers: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&headers).unwrap();
    TraceContext::parse(&headers["traceparent"]).unwrap()
}

fn sent(id: &str) -> Envelope {
    Envelope::new(MessageId::new(id).unwrap(), b"{}".to_vec())
        .with_headers(Headers::new().with("traceparent", SENDER))
}

/// The processor's span is a child of the sender's span, in its trace; the outbox row the
/// handler wrote carries the processing span as its parent.
#[tokio::test]
async fn processing_continues_the_senders_trace_and_the_outbox_row_continues_it() {
    let db = Pg::create().await;
    let exporter = InMemorySpanExporter::default();
    let (provider, guard) = record(&exporter);
    let handler = Announcing {
        outbox: Outbox::new(db.store.clone()),
    };
    let processor = Processor::new(
        db.store.clone(),
        ConsumerName::new("billing").unwrap(),
        handler,
    );
    processor.process(&sent("m-1"), None).await.unwrap();
    drop(guard);
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let process = span(&spans, "inboxed.process");
    let sender = TraceContext::parse(SENDER).unwrap();
    assert_eq!(
        process.span_context.trace_id().to_string(),
        sender.trace_id()
    );
    assert_eq!(process.parent_span_id.to_string(), sender.parent_id());
    let stored = stored_trace(&db).await;
    assert_eq!(stored.trace_id(), sender.trace_id());
    assert_eq!(
        stored.parent_id(),
        process.span_context.span_id().to_string()
    );
    db.finish().await;
}

/// A message stored by one process and worked later keeps its trace: the worker's span is a
/// child of the sender's, and the row the handler wrote carries the worker's span.
#[tokio::test]
async fn a_stored_row_is_worked_in_the_senders_trace() {
    let db = Pg::create().await;
    let consumer = ConsumerName::new("billing").unwrap();
    Inbox::new(db.store.clone(), consumer.clone())
        .notify(false)
        .store(&sent("m-2"))
        .await
        .unwrap();
    let exporter = InMemorySpanExporter::default();
    let (provider, guard) = record(&exporter);
    let handler = Announcing {
        outbox: Outbox::new(db.store.clone()),
    };
    let config = WorkerConfig::default().notify(false).liveness(false);
    let worker = Worker::new(db.store.clone(), consumer, handler, config);
    assert_eq!(worker.run_once().await.unwrap().done, 1);
    drop(guard);
    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let work = span(&spans, "inboxed.work");
    let sender = TraceContext::parse(SENDER).unwrap();
    assert_eq!(work.span_context.trace_id().to_string(), sender.trace_id());
    assert_eq!(work.parent_span_id.to_string(), sender.parent_id());
    let stored = stored_trace(&db).await;
    assert_eq!(stored.trace_id(), sender.trace_id());
    assert_eq!(stored.parent_id(), work.span_context.span_id().to_string());
    db.finish().await;
}
