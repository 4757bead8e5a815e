//! Spans and W3C trace context with the `otel` feature, on PostgreSQL, read back from
//! OpenTelemetry's in-memory exporter: processing a message (by a processor, or by a worker
//! from its stored row) continues the trace the message carries on a first attempt and links
//! to it on a later one; a batch and a relay's publish link to each message; an outbox write
//! in a handler is a `create` span whose context is stored with the row; a duplicate is an
//! event on its span. The chain across services and brokers is tested on the real brokers.

use std::collections::BTreeMap;

use inboxed_core::inbox::{Inbox, Worker, WorkerConfig};
use inboxed_core::outbox::{
    Confirmation, Outbox, OutboxRelay, OutboxRelayConfig, OutboxRow, OutgoingMessage, Publisher,
};
use inboxed_core::trace::TraceContext;
use inboxed_core::{
    ConsumerName, Envelope, Handler, HandlerError, Headers, MessageId, Outcome, Processor,
};
use inboxed_postgres::PgStore;
use inboxed_test::{Backend, Pg, TestDb};
use opentelemetry::trace::{SpanId, SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use sqlx::{PgConnection, Postgres};
use tracing_subscriber::layer::SubscriberExt as _;

const SENDER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const OTHER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

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

fn announcing(db: &TestDb<Pg>) -> Processor<PgStore, Announcing> {
    let handler = Announcing {
        outbox: Outbox::new(db.store.clone()),
    };
    Processor::new(
        db.store.clone(),
        ConsumerName::new("billing").unwrap(),
        handler,
    )
}

/// Records the spans of the current thread (the tests run on a current-thread runtime)
/// until [`Recorded::spans`].
struct Recorded {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    guard: tracing::subscriber::DefaultGuard,
}

impl Recorded {
    fn start() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("inboxed-test"));
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        Self {
            exporter,
            provider,
            guard,
        }
    }

    fn spans(self) -> Vec<SpanData> {
        drop(self.guard);
        self.provider.force_flush().unwrap();
        self.exporter.get_finished_spans().unwrap()
    }
}

/// The spans named `name` (the OpenTelemetry name), in the order they ended.
fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
    assert!(
        !found.is_empty(),
        "no span {name} in {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

/// The span ids a span links to.
fn links(span: &SpanData) -> Vec<String> {
    span.links
        .iter()
        .map(|l| l.span_context.span_id().to_string())
        .collect()
}

/// The trace contexts stored with the outbox rows, in insert order.
async fn stored_traces(db: &TestDb<Pg>) -> Vec<TraceContext> {
    let rows: Vec<String> =
        sqlx::query_scalar("SELECT headers::text FROM inboxed_outbox_messages ORDER BY id")
            .fetch_all(db.store.pool())
            .await
            .unwrap();
    rows.iter()
        .map(|h| {
            let headers: BTreeMap<String, String> = serde_json::from_str(h).unwrap();
            TraceContext::parse(&headers["traceparent"]).unwrap()
        })
        .collect()
}

fn sent(id: &str, traceparent: &str) -> Envelope {
    Envelope::new(MessageId::new(id).unwrap(), b"{}".to_vec())
        .with_headers(Headers::new().with("traceparent", traceparent))
}

/// A first delivery's `process` span is a child of the sender's span, in its trace; the
/// handler's outbox write is a `create` span under it, and the row carries that span.
#[tokio::test]
async fn processing_continues_the_senders_trace_and_the_outbox_row_continues_it() {
    let db = Pg::create().await;
    let recorded = Recorded::start();
    let outcome = announcing(&db)
        .process(&sent("m-1", SENDER), Some(1))
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Processed);
    let spans = recorded.spans();
    let process = named(&spans, "process")[0];
    let sender = TraceContext::parse(SENDER).unwrap();
    assert_eq!(process.span_kind, SpanKind::Consumer);
    assert_eq!(
        process.span_context.trace_id().to_string(),
        sender.trace_id()
    );
    assert_eq!(process.parent_span_id.to_string(), sender.parent_id());
    assert_eq!(
        attribute(process, "messaging.message.id").as_deref(),
        Some("m-1")
    );
    assert_eq!(
        attribute(process, "messaging.consumer.group.name").as_deref(),
        Some("billing")
    );
    assert_eq!(
        attribute(process, "inboxed.outcome").as_deref(),
        Some("processed")
    );
    let create = named(&spans, "create announced")[0];
    assert_eq!(create.span_kind, SpanKind::Producer);
    assert_eq!(create.parent_span_id, process.span_context.span_id());
    let stored = &stored_traces(&db).await[0];
    assert_eq!(stored.trace_id(), sender.trace_id());
    assert_eq!(
        stored.parent_id(),
        create.span_context.span_id().to_string()
    );
    db.finish().await;
}

/// A redelivery (the broker's count of 2) is not part of the sender's operation: its span
/// starts a trace of its own and links to the sender's span. A duplicate's span says so in an
/// event and its outcome.
#[tokio::test]
async fn a_redelivery_links_to_the_senders_span_and_a_duplicate_is_an_event() {
    let db = Pg::create().await;
    let processor = announcing(&db);
    let recorded = Recorded::start();
    processor
        .process(&sent("m-1", SENDER), Some(2))
        .await
        .unwrap();
    let duplicate = processor.process(&sent("m-1", SENDER), Some(3)).await;
    assert_eq!(duplicate.unwrap(), Outcome::Duplicate);
    let spans = recorded.spans();
    let [first, again] = named(&spans, "process")[..] else {
        panic!("two process spans");
    };
    let sender = TraceContext::parse(SENDER).unwrap();
    assert_eq!(first.parent_span_id, SpanId::INVALID, "a root");
    assert_ne!(first.span_context.trace_id().to_string(), sender.trace_id());
    assert_eq!(links(first), [sender.parent_id()]);
    assert_eq!(
        attribute(again, "inboxed.outcome").as_deref(),
        Some("duplicate")
    );
    let events: Vec<_> = again.events.iter().map(|e| e.name.to_string()).collect();
    assert!(events.iter().any(|e| e.contains("duplicate")), "{events:?}");
    db.finish().await;
}

/// A batch's `process` span links to each message's sender.
#[tokio::test]
async fn a_batch_links_to_each_messages_sender() {
    let db = Pg::create().await;
    let processor = announcing(&db);
    let recorded = Recorded::start();
    let batch = [sent("b-1", SENDER), sent("b-2", OTHER)];
    let results = processor
        .process_batch_with_counts(&batch, &[Some(1), Some(1)])
        .await;
    assert!(
        results
            .iter()
            .all(|r| r.as_ref().is_ok_and(|o| *o == Outcome::Processed))
    );
    let spans = recorded.spans();
    let batch_span = named(&spans, "process")[0];
    assert_eq!(
        attribute(batch_span, "messaging.batch.message_count").as_deref(),
        Some("2")
    );
    let mut linked = links(batch_span);
    linked.sort();
    let mut senders = vec![
        TraceContext::parse(SENDER).unwrap().parent_id().to_owned(),
        TraceContext::parse(OTHER).unwrap().parent_id().to_owned(),
    ];
    senders.sort();
    assert_eq!(linked, senders);
    db.finish().await;
}

/// A message stored by one process and worked later keeps its trace: the worker's span is a
/// child of the sender's, and the row the handler wrote carries the worker's `create`; a row
/// worked again (a later claim) links instead.
#[tokio::test]
async fn a_stored_row_is_worked_in_the_senders_trace() {
    let db = Pg::create().await;
    let consumer = ConsumerName::new("billing").unwrap();
    Inbox::new(db.store.clone(), consumer.clone())
        .notify(false)
        .store(&sent("m-2", SENDER))
        .await
        .unwrap();
    let recorded = Recorded::start();
    let handler = Announcing {
        outbox: Outbox::new(db.store.clone()),
    };
    let config = WorkerConfig::default().notify(false).liveness(false);
    let worker = Worker::new(db.store.clone(), consumer, handler, config);
    assert_eq!(worker.run_once().await.unwrap().done, 1);
    let spans = recorded.spans();
    let work = named(&spans, "process")[0];
    let sender = TraceContext::parse(SENDER).unwrap();
    assert_eq!(work.span_context.trace_id().to_string(), sender.trace_id());
    assert_eq!(work.parent_span_id.to_string(), sender.parent_id());
    assert!(attribute(work, "inboxed.row").is_some());
    let create = named(&spans, "create announced")[0];
    assert_eq!(create.parent_span_id, work.span_context.span_id());
    let stored = &stored_traces(&db).await[0];
    assert_eq!(
        stored.parent_id(),
        create.span_context.span_id().to_string()
    );
    db.finish().await;
}

/// Confirms every row: the relay's side of the test, not a broker's.
struct Confirming;

impl Publisher for Confirming {
    async fn publish(&self, rows: &[OutboxRow]) -> Vec<Confirmation> {
        rows.iter().map(|_| Confirmation::Confirmed).collect()
    }

    fn system(&self) -> Option<&'static str> {
        Some("rabbitmq")
    }
}

/// A relay's `send` span links to each row's `create`, whatever trace wrote it, and names
/// the broker.
#[tokio::test]
async fn a_relays_send_links_to_each_rows_creation() {
    let db = Pg::create().await;
    let processor = announcing(&db);
    processor
        .process(&sent("s-1", SENDER), Some(1))
        .await
        .unwrap();
    processor
        .process(&sent("s-2", OTHER), Some(1))
        .await
        .unwrap();
    let stored = stored_traces(&db).await;
    assert_ne!(stored[0].trace_id(), stored[1].trace_id());
    let recorded = Recorded::start();
    let relay = OutboxRelay::new(db.store.clone(), Confirming, OutboxRelayConfig::default());
    assert_eq!(relay.run_once().await.unwrap().sent, 2);
    let spans = recorded.spans();
    let send = named(&spans, "send announced")[0];
    assert_eq!(send.span_kind, SpanKind::Producer);
    assert_eq!(
        attribute(send, "messaging.system").as_deref(),
        Some("rabbitmq")
    );
    assert_eq!(links(send), [stored[0].parent_id(), stored[1].parent_id()]);
    db.finish().await;
}

/// A trace context that does not read (a traceparent of bytes that are not UTF-8, another
/// in upper case, a tracestate past its bound) never fails a message: it is processed in a
/// trace of its own, and its outbox row carries that trace, not the malformed text.
#[tokio::test]
async fn a_malformed_trace_context_never_fails_a_message() {
    let db = Pg::create().await;
    let processor = announcing(&db);
    let recorded = Recorded::start();
    let bad = [
        Headers::new().with("traceparent", b"00-\xff\xfe".to_vec()),
        Headers::new().with("traceparent", SENDER.to_uppercase()),
        Headers::new()
            .with("traceparent", SENDER)
            .with("tracestate", "k=v,".repeat(200)),
    ];
    for (i, headers) in bad.into_iter().enumerate() {
        let message = Envelope::new(MessageId::new(format!("bad-{i}")).unwrap(), b"{}".to_vec())
            .with_headers(headers);
        let outcome = processor.process(&message, Some(1)).await.unwrap();
        assert_eq!(outcome, Outcome::Processed);
    }
    let spans = recorded.spans();
    let sender = TraceContext::parse(SENDER).unwrap();
    let stored = stored_traces(&db).await;
    assert_eq!(stored.len(), 3);
    for (i, process) in named(&spans, "process").into_iter().enumerate() {
        let joined = process.span_context.trace_id().to_string() == sender.trace_id();
        // The third's traceparent reads; its tracestate, past 512 bytes, is left out.
        assert_eq!(joined, i == 2, "message {i}");
        assert_eq!(
            stored[i].trace_id(),
            process.span_context.trace_id().to_string()
        );
        assert_eq!(stored[i].tracestate(), None);
    }
    db.finish().await;
}
