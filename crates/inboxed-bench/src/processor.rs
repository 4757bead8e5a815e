//! `inboxed-bench processor`: throughput of the processor against the same statements issued
//! directly through sqlx, with the same pool and concurrency, in interleaved rounds of one run.
//! With `--latency-ms`, again behind a link of that round trip (a delaying [`Tap`]) for each
//! value: at a network's latency the dedup's price is its round trips, not the server's work.
//! Each PostgreSQL driver (sqlx, tokio-postgres, diesel-async, SeaORM) runs its processor, the
//! store-then-process worker at its defaults, and the business update alone, in the same
//! rounds.

use std::time::{Duration, Instant};

use inboxed_postgres::PgStore;

use crate::variants::{self, Variant};
use inboxed_test::tap::Tap;

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
    /// Builds the pool at sqlx's defaults, which check every connection handed out with a
    /// round trip, instead of as `PgStore::connect` builds it (a connection idle under a
    /// second goes out unchecked).
    #[arg(long)]
    sqlx_pool: bool,
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
    let pool_options = if args.sqlx_pool {
        println!("pool: sqlx's defaults (every connection checked as it is handed out)");
        sqlx::postgres::PgPoolOptions::new()
    } else {
        println!("pool: PgStore::pool_options (a connection idle under a second goes unchecked)");
        PgStore::pool_options()
    };
    drop(store);
    for (i, &ms) in args.latency_ms.iter().enumerate() {
        let round_trip = Duration::from_secs_f64(ms / 1e3);
        let tap = if round_trip.is_zero() {
            None
        } else {
            Some(Tap::delayed(&url, round_trip).await?)
        };
        let linked = tap.as_ref().map_or(Ok(url.clone()), |t| t.url(&url))?;
        let pool = pool_options
            .clone()
            .max_connections(u32::try_from(most)?)
            .connect(&linked)
            .await?;
        let setup = variants::Setup::new(PgStore::new(pool), args.accounts, &linked, most).await?;
        if args.latency_ms != [0.0] {
            let measured = round_trip_ms(setup.store().pool()).await?;
            println!();
            println!(
                "### A round trip of {ms} ms added to the link (measured: {measured:.2} ms a `SELECT 1`, median of 50)"
            );
            println!();
        }
        measure(&setup, &args, tap.as_ref(), i == 0).await?;
    }
    Ok(())
}

/// The rounds of every variant on `setup`, their table, and (with `plot`) their chart points;
/// through a `tap`, also the round trips a message took (the server's `ReadyForQuery`
/// answers, each one a wait of the client's).
async fn measure(
    setup: &variants::Setup,
    args: &Args,
    tap: Option<&Tap>,
    plot: bool,
) -> anyhow::Result<()> {
    let variants = [
        Variant::Processor,
        Variant::RawSqlx,
        Variant::BusinessOnly,
        Variant::RawNoSettle,
        Variant::TokioProcessor,
        Variant::TokioBusinessOnly,
        Variant::DieselProcessor,
        Variant::DieselBusinessOnly,
        Variant::SeaProcessor,
        Variant::SeaBusinessOnly,
        Variant::SqlxWorker,
        Variant::TokioWorker,
        Variant::DieselWorker,
        Variant::SeaWorker,
    ];
    let dur = Duration::from_secs_f64(args.seconds);
    let mut trips: Vec<(usize, usize, f64)> = Vec::new();
    let rates = crate::load::rounds(
        args.rounds,
        &args.workers,
        variants,
        async |variant, workers| {
            let before = tap.map(Tap::counted);
            let started = Instant::now();
            let n = setup.run(variant, workers, dur).await?;
            let rate = n as f64 / started.elapsed().as_secs_f64();
            if let (Some(tap), Some(before)) = (tap, before) {
                let waits = (tap.counted() - before).round_trips as f64 / n.max(1) as f64;
                trips.push((variant as usize, workers, waits));
            }
            Ok(rate)
        },
        |round, workers, row| {
            println!(
                "round {round}, {workers} workers: processor {:.0} msg/s, raw sqlx {:.0} msg/s, \
                 business only {:.0} tx/s, raw sqlx without the settling statement {:.0} msg/s; \
                 tokio-postgres: processor {:.0} msg/s, business only {:.0} tx/s; \
                 diesel-async: processor {:.0} msg/s, business only {:.0} tx/s; \
                 SeaORM: processor {:.0} msg/s, business only {:.0} tx/s; the worker: sqlx {:.0}, \
                 tokio-postgres {:.0}, diesel-async {:.0}, SeaORM {:.0} msg/s",
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                row[6],
                row[7],
                row[8],
                row[9],
                row[10],
                row[11],
                row[12],
                row[13]
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
        let of = |f: &dyn Fn(&[f64; 14]) -> f64| crate::median_at(&rates, workers, f);
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
    // Each driver: its processor and its worker against the business update alone through the
    // same driver.
    let drivers = [
        (
            "sqlx",
            Variant::Processor,
            Variant::SqlxWorker,
            Variant::BusinessOnly,
        ),
        (
            "tokio-postgres",
            Variant::TokioProcessor,
            Variant::TokioWorker,
            Variant::TokioBusinessOnly,
        ),
        (
            "diesel-async",
            Variant::DieselProcessor,
            Variant::DieselWorker,
            Variant::DieselBusinessOnly,
        ),
        (
            "SeaORM",
            Variant::SeaProcessor,
            Variant::SeaWorker,
            Variant::SeaBusinessOnly,
        ),
    ];
    let trips_of = |v: Variant, workers: usize| {
        if trips.is_empty() {
            return "-".to_owned();
        }
        format!(
            "{:.2}",
            crate::median(
                trips
                    .iter()
                    .filter(|(i, w, _)| *i == v as usize && *w == workers)
                    .map(|(_, _, t)| *t)
                    .collect(),
            )
        )
    };
    println!();
    println!(
        "| workers | driver | processor msg/s | worker msg/s | business update alone tx/s | \
         processor / business alone | worker / business alone | round trips a message: \
         processor | worker | business update alone |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &workers in &args.workers {
        let of = |f: &dyn Fn(&[f64; 14]) -> f64| crate::median_at(&rates, workers, f);
        for (name, processor, worker, alone) in drivers {
            let (p, w, a) = (processor as usize, worker as usize, alone as usize);
            println!(
                "| {workers} | {name} | {:.0} | {:.0} | {:.0} | {:.2} | {:.2} | {} | {} | {} |",
                of(&|r| r[p]),
                of(&|r| r[w]),
                of(&|r| r[a]),
                of(&|r| r[p] / r[a]),
                of(&|r| r[w] / r[a]),
                trips_of(processor, workers),
                trips_of(worker, workers),
                trips_of(alone, workers),
            );
        }
    }
    if !trips.is_empty() {
        println!();
        println!(
            "| workers | round trips a message: processor | same statements through sqlx | \
             business update alone | without the settling statement |"
        );
        println!("|---|---|---|---|---|");
        for &workers in &args.workers {
            println!(
                "| {workers} | {} | {} | {} | {} |",
                trips_of(Variant::Processor, workers),
                trips_of(Variant::RawSqlx, workers),
                trips_of(Variant::BusinessOnly, workers),
                trips_of(Variant::RawNoSettle, workers),
            );
        }
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
