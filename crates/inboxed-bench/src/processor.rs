//! `inboxed-bench processor`: throughput of the processor against the same statements issued
//! directly through sqlx, with the same pool and concurrency, in interleaved rounds of one run.

use std::time::{Duration, Instant};

use crate::variants::{self, Variant};

/// Processor throughput against raw sqlx, same pool, same concurrency, same run.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Concurrent workers (comma-separated); the pool holds as many connections as the most.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    workers: Vec<usize>,
    /// Seconds per variant per round.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Rounds; each runs every variant once, in rotating order.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Accounts the business update spreads over.
    #[arg(long, default_value_t = 10_000)]
    accounts: i64,
}

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let most = args.workers.iter().copied().max().unwrap_or(8);
    let store = variants::bench_store(server, most, args.accounts).await?;
    let setup = variants::Setup::new(store, args.accounts).await?;
    let sync: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(setup.pool())
        .await?;
    println!(
        "{} s per variant, {} rounds, synchronous_commit = {sync}, {} accounts",
        args.seconds, args.rounds, args.accounts
    );
    let variants = [
        Variant::Processor,
        Variant::RawSqlx,
        Variant::BusinessOnly,
        Variant::RawNoSettle,
    ];
    let dur = Duration::from_secs_f64(args.seconds);
    let rates = crate::load::rounds(
        args.rounds,
        &args.workers,
        variants,
        async |variant, workers| {
            let started = Instant::now();
            let n = setup.run(variant, workers, dur).await?;
            Ok(n as f64 / started.elapsed().as_secs_f64())
        },
        |round, workers, row| {
            println!(
                "round {round}, {workers} workers: processor {:.0} msg/s, raw sqlx {:.0} msg/s, \
                 business only {:.0} tx/s, raw sqlx without the settling statement {:.0} msg/s",
                row[0], row[1], row[2], row[3]
            );
        },
    )
    .await?;
    println!();
    println!(
        "| workers | processor msg/s | same statements through sqlx msg/s | business update alone tx/s | \
         processor / sqlx (library overhead) | sqlx with claim / business alone (cost of dedup) | \
         claim without the settling statement / business alone |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &workers in &args.workers {
        let of = |f: &dyn Fn(&[f64; 4]) -> f64| crate::median_at(&rates, workers, f);
        println!(
            "| {workers} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {:.2} |",
            of(&|r| r[0]),
            of(&|r| r[1]),
            of(&|r| r[2]),
            of(&|r| r[0] / r[1]),
            of(&|r| r[1] / r[2]),
            of(&|r| r[3] / r[2])
        );
    }
    for &workers in &args.workers {
        let w = workers as f64;
        for (i, series) in [
            "processor",
            "same statements through sqlx",
            "business update alone",
        ]
        .into_iter()
        .enumerate()
        {
            let rate = crate::median(
                rates
                    .iter()
                    .filter(|(n, _)| *n == workers)
                    .map(|(_, r)| r[i])
                    .collect(),
            );
            crate::plot::point("processor-workers", series, w, rate);
        }
    }
    Ok(())
}
