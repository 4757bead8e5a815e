//! `inboxed-bench processor`: throughput of the processor against the same statements issued
//! directly through sqlx, with the same pool and concurrency, in interleaved rounds of one run.

use std::time::{Duration, Instant};

use sqlx::postgres::PgPoolOptions;

use crate::variants::{self, Variant};

/// Processor throughput against raw sqlx, same pool, same concurrency, same run.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Concurrent workers (and pool size).
    #[arg(long, default_value_t = 8)]
    workers: usize,
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
    let url = crate::fresh_database(server).await?;
    let pool = PgPoolOptions::new()
        .max_connections(u32::try_from(args.workers).unwrap_or(8))
        .connect(&url)
        .await?;
    let setup = variants::Setup::new(pool, args.accounts).await?;
    let sync: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(setup.pool())
        .await?;
    println!(
        "workers {}, {} s per variant, {} rounds, synchronous_commit = {sync}, {} accounts",
        args.workers, args.seconds, args.rounds, args.accounts
    );
    let variants = [Variant::Processor, Variant::RawSqlx, Variant::BusinessOnly];
    let mut rates: Vec<[f64; 3]> = Vec::new();
    for round in 0..args.rounds {
        let mut row = [0.0; 3];
        for k in 0..variants.len() {
            let i = (k + round) % variants.len();
            let dur = Duration::from_secs_f64(args.seconds);
            let started = Instant::now();
            let n = setup.run(variants[i], args.workers, dur).await?;
            row[i] = n as f64 / started.elapsed().as_secs_f64();
        }
        println!(
            "round {}: processor {:.0} msg/s, raw sqlx {:.0} msg/s, business only {:.0} tx/s",
            round + 1,
            row[0],
            row[1],
            row[2]
        );
        rates.push(row);
    }
    let ratio = |a: usize, b: usize| crate::median(rates.iter().map(|r| r[a] / r[b]).collect());
    let med = |a: usize| crate::median(rates.iter().map(|r| r[a]).collect());
    println!();
    println!("| variant | median msg/s |");
    println!("|---|---|");
    println!("| processor (`Processor::process`) | {:.0} |", med(0));
    println!("| same statements through sqlx | {:.0} |", med(1));
    println!("| business update alone, no claim | {:.0} |", med(2));
    println!();
    println!(
        "processor / raw sqlx (median of per-round ratios): {:.2}",
        ratio(0, 1)
    );
    println!(
        "raw sqlx with claim / business alone (cost of dedup): {:.2}",
        ratio(1, 2)
    );
    Ok(())
}
