//! `inboxed-bench trace`: what tracing costs the processor and the outbox write, with the
//! `otel` feature built in. The processor alone on PostgreSQL, one message at a time (a first
//! delivery carrying a `traceparent`), its handler crediting an account and writing one
//! outbox row caused by the message: this process's CPU per message, and the rate, under
//! three subscribers in interleaved rounds (each first in turn):
//!
//! - none: no subscriber, what a service without tracing runs (the baseline);
//! - OpenTelemetry without an exporter: `tracing-opentelemetry` at its defaults over a
//!   provider with no processor, so every span is built, parented, linked and dropped;
//! - the same, lean: without the layer's context activation and inactivity tracking (work at
//!   every poll of a span's future) and its location and thread attributes;
//! - OpenTelemetry with an exporter: the defaults, batched to an exporter that keeps the spans
//!   in memory (what a service pays in process before its exporter's network I/O).
//!
//! The ratios are baseline CPU over each configuration's: the share of the untraced
//! throughput a CPU-bound service keeps.

use std::time::Instant;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{BatchSpanProcessor, InMemorySpanExporter, SdkTracerProvider};
use sqlx::{PgConnection, Postgres};
use tracing::Dispatch;
use tracing::instrument::WithSubscriber as _;
use tracing_subscriber::layer::SubscriberExt as _;

use inboxed_core::outbox::{Outbox, OutgoingMessage};
use inboxed_core::{ConsumerName, Envelope, Handler, HandlerError, Headers, MessageId, Processor};
use inboxed_postgres::PgStore;

use crate::cpu::Cpu;
use crate::variants::{Credit, bench_store};

const ACCOUNTS: i64 = 1_000;
/// This benchmark's process name, as `/proc` gives it (truncated to 15 bytes).
const SELF: &str = "inboxed-bench";
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Tracing's cost to the processor and the outbox write.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Messages per round and configuration.
    #[arg(long, default_value_t = 5_000)]
    messages: u64,
    /// Rounds; each measures the four configurations.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// A smoke run for CI: 300 messages, 2 rounds.
    #[arg(long)]
    quick: bool,
    /// Only this configuration (0 to 3, in the table's order): for a profiler.
    #[arg(long)]
    only: Option<usize>,
}

/// [`Credit`] and one outbox row caused by the message.
struct CreditAndAnnounce {
    credit: Credit,
    outbox: Outbox<PgStore>,
}

impl Handler<Postgres> for CreditAndAnnounce {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        self.credit.handle(msg, conn).await?;
        let out = OutgoingMessage::new("billing.credited", msg.payload().to_vec()).caused_by(msg);
        self.outbox.write(conn, &out).await?;
        Ok(())
    }
}

const NAMES: [&str; 4] = [
    "no subscriber",
    "OpenTelemetry at its defaults, no exporter",
    "OpenTelemetry lean (no context activation, inactivity tracking, location or thread attributes), no exporter",
    "OpenTelemetry at its defaults, exporter (in memory, batched)",
];

/// The subscriber of configuration `which`, and its provider (kept until the round is over).
fn subscriber(which: usize) -> (Dispatch, Option<SdkTracerProvider>) {
    let provider = match which {
        0 => return (Dispatch::none(), None),
        1 => SdkTracerProvider::builder().build(),
        _ => SdkTracerProvider::builder()
            .with_span_processor(
                BatchSpanProcessor::builder(InMemorySpanExporter::default()).build(),
            )
            .build(),
    };
    // As a service sets it up: `tracing-opentelemetry` at its defaults, under the usual INFO
    // filter (without one, every DEBUG event of sqlx becomes an event of the span).
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("inboxed-bench"))
        .with_tracked_inactivity(which != 2)
        .with_location(which != 2)
        .with_threads(which != 2)
        .with_context_activation(which != 2);
    let subscriber = tracing_subscriber::registry()
        .with(layer)
        .with(tracing_subscriber::filter::LevelFilter::INFO);
    let dispatch = Dispatch::new(subscriber);
    (dispatch, Some(provider))
}

fn messages(n: u64) -> Vec<Envelope> {
    (0..n)
        .map(|_| {
            Envelope::new(
                MessageId::from_uuid(uuid::Uuid::now_v7()),
                b"{\"credit\":1}".to_vec(),
            )
            .with_headers(Headers::new().with("traceparent", TRACEPARENT))
        })
        .collect()
}

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let (count, rounds) = if args.quick {
        (300, 2)
    } else {
        (args.messages, args.rounds)
    };
    let store = bench_store(server, 8, ACCOUNTS).await?;
    let handler = CreditAndAnnounce {
        credit: Credit { accounts: ACCOUNTS },
        outbox: Outbox::new(store.clone()).quiet(),
    };
    let processor = Processor::new(store.clone(), ConsumerName::new("bench")?, handler);
    processor.ensure_ready().await?;
    println!(
        "processor alone on PostgreSQL, one message at a time with a traceparent, the handler \
         crediting an account and writing one outbox row: {count} messages per round and \
         configuration, {rounds} rounds"
    );
    let (mut cpu, mut rates): ([Vec<f64>; 4], [Vec<f64>; 4]) = Default::default();
    for round in 1..=rounds {
        let mut order = [0, 1, 2, 3];
        order.rotate_left(round % 4);
        let mut line = format!("round {round}:");
        for which in order {
            if args.only.is_some_and(|only| only != which) {
                continue;
            }
            let envelopes = messages(count);
            let (dispatch, provider) = subscriber(which);
            let before = Cpu::read(&[SELF]);
            let started = Instant::now();
            async {
                for envelope in &envelopes {
                    processor.process(envelope, Some(1)).await?;
                }
                Ok::<_, inboxed_core::Error>(())
            }
            .with_subscriber(dispatch)
            .await?;
            let elapsed = started.elapsed().as_secs_f64();
            if let Some(provider) = provider {
                provider.shutdown()?;
            }
            #[allow(clippy::cast_precision_loss, reason = "message counts")]
            let (per, rate) = (
                before.used(&Cpu::read(&[SELF]), SELF) / count as f64 * 1e6,
                count as f64 / elapsed,
            );
            line.push_str(&format!(" {} {per:.0} µs {rate:.0} msg/s;", NAMES[which]));
            cpu[which].push(per);
            rates[which].push(rate);
        }
        println!("{line}");
    }
    let ratio = |which: usize| {
        crate::median(
            cpu[0]
                .iter()
                .zip(&cpu[which])
                .map(|(base, with)| base / with)
                .collect(),
        )
    };
    println!();
    println!(
        "| tracing (medians of {rounds} rounds) | CPU µs per message, this process | msg/s | share of the untraced throughput (baseline CPU / this CPU; goal ≥ 0.95 without an exporter) |"
    );
    println!("|---|---|---|---|");
    for which in 0..4 {
        println!(
            "| {} | {:.0} | {:.0} | {:.3} |",
            NAMES[which],
            crate::median(cpu[which].clone()),
            crate::median(rates[which].clone()),
            ratio(which)
        );
    }
    println!();
    // The smoke run's gate: a gross regression only (a dev build measured 0.72 at the
    // layer's defaults; a release build 0.90), never the noise of two rounds.
    if args.quick && ratio(1) < 0.4 {
        anyhow::bail!(
            "OpenTelemetry without an exporter kept {:.3} of the untraced throughput, under the \
             smoke run's floor of 0.4",
            ratio(1)
        );
    }
    Ok(())
}
