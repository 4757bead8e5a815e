//! `inboxed demo`: the real processor on a ledger, driven through a simulated at-least-once
//! broker with injected faults, checked against the balances computed from the messages.

mod broker;
mod check;
mod ledger;
mod stored;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use inboxed_core::{ConsumerName, Handler, Processor, Settled, Store, settle};

use super::AnyStore;
use super::database::redact;
use broker::{Broker, Fault, FaultRates, Published};
use ledger::{Transfer, Transfers, account};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Database URL: sqlite://path (created if missing), postgres://… or mysql://…/database
    /// (`--mode direct` only on MySQL so far)
    #[arg(
        long,
        env = "DATABASE_URL",
        hide_env_values = true,
        default_value = "sqlite://inboxed-demo.db"
    )]
    database_url: String,
    /// Distinct messages the producer creates.
    #[arg(long, default_value_t = 2_000)]
    messages: usize,
    /// Accounts the transfers move money between.
    #[arg(long, default_value_t = 20)]
    accounts: usize,
    /// Consumer tasks processing at once.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Seed of every random choice, so a run can be repeated.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// `direct`: each delivery processed as it arrives, acked after the commit.
    /// `store-then-process`: each delivery stored and acked, then workers process the rows.
    #[arg(long, value_enum, default_value = "direct")]
    mode: Mode,
}

/// How the demo consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// The processor on each delivery.
    Direct,
    /// Receipt into the inbox table, then workers.
    StoreThenProcess,
}

const OPENING_BALANCE: i64 = 100_000;

/// What the producer sent, and what the ledger must show afterwards.
struct Plan {
    published: Vec<Published>,
    expected: BTreeMap<String, i64>,
    valid: usize,
    poison: usize,
    keyless: usize,
    retries: usize,
}

fn plan(args: &Args) -> Plan {
    let mut rng = fastrand::Rng::with_seed(args.seed);
    let accounts = args.accounts.max(2);
    let mut expected: BTreeMap<String, i64> = (0..accounts)
        .map(|i| (account(i), OPENING_BALANCE))
        .collect();
    let mut published = Vec::new();
    let (mut valid, mut poison, mut retries) = (0, 0, 0);
    for n in 0..args.messages {
        // The id is assigned once, when the event is created; retries reuse it.
        let id = uuid::Uuid::now_v7().to_string();
        let from = rng.usize(..accounts);
        let to = (from + rng.usize(1..accounts)) % accounts;
        let amount = rng.i64(1..500);
        let payload = if n % 100 == 37 {
            poison += 1;
            let to = "acct-unknown".to_owned();
            serde_json::to_vec(&Transfer {
                from: account(from),
                to,
                amount,
            })
        } else if n % 100 == 73 {
            poison += 1;
            Ok(b"{\"from\": \"acct-000\", \"amount\": ".to_vec())
        } else {
            valid += 1;
            *expected.entry(account(from)).or_default() -= amount;
            *expected.entry(account(to)).or_default() += amount;
            serde_json::to_vec(&Transfer {
                from: account(from),
                to: account(to),
                amount,
            })
        };
        let message = Published {
            id: Some(id),
            payload: payload.unwrap_or_default(),
        };
        if rng.f64() < 0.1 {
            retries += 1;
            published.push(message.clone());
        }
        published.push(message);
    }
    let keyless = 3;
    for _ in 0..keyless {
        published.push(Published {
            id: None,
            payload: b"{\"note\": \"no message id header\"}".to_vec(),
        });
    }
    fastrand::Rng::with_seed(args.seed + 1).shuffle(&mut published);
    Plan {
        published,
        expected,
        valid,
        poison,
        keyless,
        retries,
    }
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let workers = args.workers.max(1);
    let store =
        AnyStore::connect(&args.database_url, u32::try_from(workers + 2).unwrap_or(8)).await?;
    store.migrate().await?;
    let plan = plan(&args);
    check::reset(&store, args.accounts.max(2), OPENING_BALANCE).await?;
    writeln!(
        out,
        "inboxed demo on {} ({}, {}): {} messages, {} workers",
        redact(&args.database_url),
        store.backend(),
        match args.mode {
            Mode::Direct => "direct",
            Mode::StoreThenProcess => "store-then-process",
        },
        args.messages,
        workers
    )?;
    let rates = FaultRates {
        crash: 0.05,
        lose_ack: 0.05,
        concurrent: 0.08,
    };
    let broker = Broker::new(plan.published.clone(), rates, args.seed);
    let consumer = ConsumerName::new("demo")?;
    let started = Instant::now();
    let outcomes = match (&store, args.mode) {
        (AnyStore::Postgres(s), Mode::Direct) => {
            let processor = Processor::new(s.clone(), consumer, Transfers);
            drive(processor, &broker, workers).await
        }
        (AnyStore::Sqlite(s), Mode::Direct) => {
            let processor = Processor::new(s.clone(), consumer, Transfers);
            drive(processor, &broker, workers).await
        }
        (AnyStore::Postgres(s), Mode::StoreThenProcess) => {
            stored::run(s.clone(), consumer, Transfers, &broker, workers).await?
        }
        (AnyStore::Sqlite(s), Mode::StoreThenProcess) => {
            stored::run(s.clone(), consumer, Transfers, &broker, workers).await?
        }
        (AnyStore::MySql(s), Mode::Direct) => {
            let processor = Processor::new(s.clone(), consumer, Transfers);
            drive(processor, &broker, workers).await
        }
        (AnyStore::MySql(s), Mode::StoreThenProcess) => {
            stored::run(s.clone(), consumer, Transfers, &broker, workers).await?
        }
    };
    let elapsed = started.elapsed();
    let report =
        check::Report::gather(&store, &plan, broker.stats(), outcomes, elapsed, args.mode).await?;
    report.print(out)?;
    Ok(if report.exact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs `workers` consumer tasks until the broker has nothing unacked; returns outcome counts.
async fn drive<S, H>(
    processor: Processor<S, H>,
    broker: &Broker,
    workers: usize,
) -> BTreeMap<&'static str, u64>
where
    S: Store,
    H: Handler<S::Db>,
{
    let bar = ProgressBar::new(u64::try_from(broker.acked() + broker.unacked_count()).unwrap_or(0));
    bar.set_style(
        ProgressStyle::with_template("  {bar:40} {pos}/{len} acked  {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut tasks = Vec::new();
    for w in 0..workers {
        let processor = processor.clone();
        let broker = broker.clone();
        let bar = bar.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(1_000 + w as u64);
            let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
            while let Some((delivery, fault)) = broker.next().await {
                let index = delivery.index;
                let work = settle(&processor, delivery, None);
                let settled = if fault == Fault::Crash {
                    // Die at a random moment: before the claim, inside the handler, during
                    // the commit or just before the ack. Whatever was not committed is gone.
                    let moment = Duration::from_micros(rng.u64(0..3_000));
                    tokio::select! {
                        settled = work => settled,
                        () = tokio::time::sleep(moment) => {
                            broker.crashed(index);
                            *counts.entry("crashed").or_default() += 1;
                            continue;
                        }
                    }
                } else {
                    work.await
                };
                let key = match settled {
                    Ok(Settled::Acked(outcome)) => outcome.as_str(),
                    Ok(Settled::Requeued { .. }) => "requeued",
                    Ok(_) | Err(_) => "broker_error",
                };
                *counts.entry(key).or_default() += 1;
                bar.set_position(u64::try_from(broker.acked()).unwrap_or(0));
            }
            counts
        }));
    }
    let mut totals = BTreeMap::new();
    for t in tasks {
        if let Ok(counts) = t.await {
            for (k, v) in counts {
                *totals.entry(k).or_default() += v;
            }
        }
    }
    bar.finish_and_clear();
    totals
}
