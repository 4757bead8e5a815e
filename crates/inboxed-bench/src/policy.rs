//! `inboxed-bench policy`: what the outage policy (the kill switch and the ladder, on by
//! default) costs and buys. RabbitMQ → processor → PostgreSQL at a newcomer's settings
//! (`ProcessorConfig::default()`, `ConsumerConfig::default()`, `RabbitConfig`'s prefetch of 32):
//!
//! - nothing failing: the defaults against the same consumer with `KillSwitch::off()` (which
//!   does no work: the policy before there was one), interleaved round by round (each in turn
//!   first); the ratio of each round, and this process's CPU per message;
//! - a downstream outage at the start of a drain: the time from the outage's end until the queue
//!   is drained, against a clean drain of the same messages;
//! - what a two-core machine can decide of the first: the processor alone (no broker, one
//!   message at a time), this process's CPU per message with the defaults against
//!   `KillSwitch::off()`, interleaved rounds. The policy's work is in this process; the
//!   database's is the same for both.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lapin::{Connection, ConnectionProperties};
use sqlx::{PgConnection, Postgres};

use inboxed_core::{
    ConsumerConfig, ConsumerName, Envelope, Handler, HandlerError, KillSwitch, MessageId,
    Processor, ProcessorConfig,
};
use inboxed_postgres::PgStore;

use crate::cpu::Cpu;
use crate::rabbitmq::{ACCOUNTS, Broker, measure, through_inbox};
use crate::variants::{Credit, bench_store};

/// The policy's cost when nothing fails, and the drain after an outage.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    broker: Broker,
    /// Messages per measurement.
    #[arg(long, default_value_t = 10_000)]
    messages: u64,
    /// Rounds of the cost measurement; each measures both consumers.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// How long the downstream service is down at the start of the outage drain, in seconds.
    #[arg(long, default_value_t = 30)]
    outage_secs: u64,
    /// Messages per round of the processor-alone CPU measurement.
    #[arg(long, default_value_t = 5_000)]
    cpu_messages: u64,
    /// Rounds of the processor-alone CPU measurement; each measures both configurations.
    #[arg(long, default_value_t = 20)]
    cpu_rounds: usize,
}

/// The processor alone, one message at a time through `Processor::process` (a first
/// delivery, as a broker would count it): this process's CPU per message with the defaults and
/// with `KillSwitch::off()`, in interleaved rounds; the median of the rounds' ratios, off /
/// defaults, is the share of the bare processor's throughput the policy leaves when the CPU is
/// what limits it.
async fn processor_alone(store: &PgStore, messages: u64, rounds: usize) -> anyhow::Result<()> {
    println!(
        "processor alone: {messages} messages per round, {rounds} rounds, one at a time, \
         first deliveries"
    );
    let (mut ratios, mut with, mut without) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        let mut cpu = [0.0; 2];
        let order = if round % 2 == 1 { [0, 1] } else { [1, 0] };
        for which in order {
            let config = if which == 0 {
                ProcessorConfig::default()
            } else {
                ProcessorConfig::default().kill_switch(KillSwitch::off())
            };
            let p = processor(store, up(), config)?;
            p.ensure_ready().await?;
            let envelopes: Vec<Envelope> = (0..messages)
                .map(|_| Envelope::new(MessageId::from_uuid(uuid::Uuid::now_v7()), b"{}".to_vec()))
                .collect();
            let before = Cpu::read(&[SELF]);
            for envelope in &envelopes {
                p.process(envelope, Some(1)).await?;
            }
            #[allow(clippy::cast_precision_loss, reason = "message counts")]
            let per = before.used(&Cpu::read(&[SELF]), SELF) / messages as f64 * 1e6;
            cpu[which] = per;
        }
        println!(
            "round {round}: CPU per message, defaults {:.1} µs, kill switch off {:.1} µs, \
             ratio off / defaults {:.3}",
            cpu[0],
            cpu[1],
            cpu[1] / cpu[0]
        );
        ratios.push(cpu[1] / cpu[0]);
        with.push(cpu[0]);
        without.push(cpu[1]);
    }
    println!();
    println!("| processor alone, nothing failing (medians) | CPU µs per message, this process |");
    println!("|---|---|");
    println!(
        "| defaults (kill switch, ladder) | {:.1} |",
        crate::median(with)
    );
    println!("| `KillSwitch::off()` | {:.1} |", crate::median(without));
    println!(
        "| median of the rounds' ratios, off / defaults (throughput share, goal ≥ 0.95) | {:.3} |",
        crate::median(ratios)
    );
    println!();
    Ok(())
}

/// [`Credit`], failing transiently while `down` is set: a downstream service that is down.
struct Downstream {
    credit: Credit,
    down: Arc<AtomicBool>,
}

impl Handler<Postgres> for Downstream {
    async fn handle(&self, msg: &Envelope, conn: &mut PgConnection) -> Result<(), HandlerError> {
        if self.down.load(Ordering::Relaxed) {
            return Err(HandlerError::transient("downstream service unavailable"));
        }
        self.credit.handle(msg, conn).await
    }
}

/// The downstream, up.
fn up() -> Downstream {
    Downstream {
        credit: Credit { accounts: ACCOUNTS },
        down: Arc::default(),
    }
}

fn processor(
    store: &PgStore,
    handler: Downstream,
    config: ProcessorConfig,
) -> anyhow::Result<Processor<PgStore, Downstream>> {
    Ok(Processor::with_config(
        store.clone(),
        ConsumerName::new("bench")?,
        handler,
        config,
    ))
}

/// This benchmark's process name, as `/proc` gives it (truncated to 15 bytes).
const SELF: &str = "inboxed-bench";

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let store = bench_store(server, 32, ACCOUNTS).await?;
    processor_alone(&store, args.cpu_messages, args.cpu_rounds).await?;
    let conn = Connection::connect(&args.broker.amqp_url, ConnectionProperties::default()).await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(lapin::options::ConfirmSelectOptions::default())
        .await?;
    let prefetch = inboxed_rabbitmq::RabbitConfig::new("", "").prefetch;
    println!(
        "{} messages per measurement, {} rounds, RabbitMQ classic queue, prefetch {prefetch}, \
         ConsumerConfig::default()",
        args.messages, args.rounds
    );
    let mut ratios = Vec::new();
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut cpu_with, mut cpu_without) = (Vec::new(), Vec::new());
    for round in 1..=args.rounds {
        // Each round runs the two in the other order than the last, so that whatever the first
        // measurement of a round pays (or leaves behind) falls on each as often.
        let (mut rates, mut cpu) = ([0.0; 2], [0.0; 2]);
        let order = if round % 2 == 1 { [0, 1] } else { [1, 0] };
        for which in order {
            let config = if which == 0 {
                ProcessorConfig::default()
            } else {
                ProcessorConfig::default().kill_switch(KillSwitch::off())
            };
            let p = processor(&store, up(), config)?;
            p.ensure_ready().await?;
            let before = Cpu::read(&[SELF]);
            rates[which] = measure(
                &channel,
                &args.broker.amqp_url,
                args.messages,
                prefetch,
                |source, target| through_inbox(p, source, ConsumerConfig::default(), target),
            )
            .await?;
            #[allow(clippy::cast_precision_loss, reason = "message counts")]
            let per = before.used(&Cpu::read(&[SELF]), SELF) / args.messages as f64 * 1e6;
            cpu[which] = per;
        }
        let [policy, bare] = rates;
        println!(
            "round {round}: defaults {policy:.0} msg/s, kill switch off {bare:.0} msg/s, \
             ratio {:.3}; this process's CPU per message (publishing included) {:.0} µs and \
             {:.0} µs",
            policy / bare,
            cpu[0],
            cpu[1]
        );
        ratios.push(policy / bare);
        cpu_with.push(cpu[0]);
        cpu_without.push(cpu[1]);
        with.push(policy);
        without.push(bare);
    }
    println!();
    println!("| nothing failing (medians) | msg/s | CPU µs per message, this process |");
    println!("|---|---|---|");
    println!(
        "| defaults (kill switch, ladder) | {:.0} | {:.0} |",
        crate::median(with),
        crate::median(cpu_with)
    );
    println!(
        "| `KillSwitch::off()` | {:.0} | {:.0} |",
        crate::median(without),
        crate::median(cpu_without)
    );
    println!(
        "| median of the rounds' ratios, defaults / off | {:.3} | |",
        crate::median(ratios)
    );

    // The drain after an outage against a clean one, same messages, same settings.
    let outage = Duration::from_secs(args.outage_secs);
    let clean = {
        let p = processor(&store, up(), ProcessorConfig::default())?;
        measure(
            &channel,
            &args.broker.amqp_url,
            args.messages,
            prefetch,
            |source, target| through_inbox(p, source, ConsumerConfig::default(), target),
        )
        .await?
    };
    let clean_secs = args.messages as f64 / clean;
    let handler = up();
    let down = Arc::clone(&handler.down);
    down.store(true, Ordering::Relaxed);
    let p = processor(&store, handler, ProcessorConfig::default())?;
    let ended = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let mark = Arc::clone(&ended);
    let lifting = tokio::spawn(async move {
        tokio::time::sleep(outage).await;
        down.store(false, Ordering::Relaxed);
        *mark
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
    });
    measure(
        &channel,
        &args.broker.amqp_url,
        args.messages,
        prefetch,
        |source, target| through_inbox(p, source, ConsumerConfig::default(), target),
    )
    .await?;
    let drained = Instant::now();
    lifting.await?;
    let since_end = ended
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .map_or(0.0, |at| drained.duration_since(at).as_secs_f64());
    let dead: i64 = sqlx::query_scalar("SELECT count(*) FROM inboxed_dead_letters")
        .fetch_one(store.pool())
        .await?;
    println!();
    println!("| {} messages | seconds |", args.messages);
    println!("|---|---|");
    println!("| clean drain | {clean_secs:.1} |");
    println!(
        "| drain from the end of a {}-second outage at its start | {since_end:.1} |",
        args.outage_secs
    );
    println!("| dead letters after both | {dead} |");
    Ok(())
}
