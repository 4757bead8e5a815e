//! `inboxed-bench processor`: throughput of the processor against the same statements issued
//! directly through sqlx, with the same pool and concurrency, in interleaved rounds of one run.
//! With `--latency-ms`, again behind a link of that round trip (a delaying [`Tap`]) for each
//! value: at a network's latency the dedup's price is its round trips, not the server's work.

use std::time::{Duration, Instant};

use crate::tap::Tap;
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
    /// Round trips of the link to the server, milliseconds (comma-separated); 0 connects
    /// directly, any other through a proxy holding each chunk half of it each way.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    latency_ms: Vec<f64>,
}

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let most = args.workers.iter().copied().max().unwrap_or(8);
    let (url, store) = variants::bench_database(server, most, args.accounts).await?;
    let sync: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(store.pool())
        .await?;
    println!(
        "{} s per variant, {} rounds, synchronous_commit = {sync}, {} accounts",
        args.seconds, args.rounds, args.accounts
    );
    for (i, &ms) in args.latency_ms.iter().enumerate() {
        let round_trip = Duration::from_secs_f64(ms / 1e3);
        let (setup, _tap) = if round_trip.is_zero() {
            (
                variants::Setup::new(store.clone(), args.accounts).await?,
                None,
            )
        } else {
            let tap = Tap::delayed(&url, round_trip).await?;
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(u32::try_from(most)?)
                .connect(&tap.url(&url)?)
                .await?;
            let through = inboxed_postgres::PgStore::new(pool);
            (
                variants::Setup::new(through, args.accounts).await?,
                Some(tap),
            )
        };
        if args.latency_ms != [0.0] {
            let measured = round_trip_ms(setup.store().pool()).await?;
            println!();
            println!(
                "### A round trip of {ms} ms added to the link (measured: {measured:.2} ms a `SELECT 1`, median of 50)"
            );
            println!();
        }
        measure(&setup, &args, i == 0).await?;
    }
    Ok(())
}

/// The rounds of every variant on `setup`, their table, and (with `plot`) their chart points.
async fn measure(setup: &variants::Setup, args: &Args, plot: bool) -> anyhow::Result<()> {
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
    for &workers in args.workers.iter().filter(|_| plot) {
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

/// The median time of a `SELECT 1` on one connection of `pool`, milliseconds.
async fn round_trip_ms(pool: &sqlx::PgPool) -> anyhow::Result<f64> {
    let mut conn = pool.acquire().await?;
    let mut took = Vec::new();
    for _ in 0..50 {
        let started = Instant::now();
        sqlx::query("SELECT 1").execute(&mut *conn).await?;
        took.push(started.elapsed().as_secs_f64() * 1e3);
    }
    Ok(crate::median(took))
}
