//! `inboxed-bench ids`: random (v4) against time-ordered (v7) message ids once the
//! processed-keys table already holds many keys. Two consumers share one table, each seeded
//! with `rows` keys of its kind, and run the processor in interleaved rounds, so both see the
//! same server, cache and checkpoint schedule. Besides the rate, each measurement reports the
//! WAL written and the blocks read per message: a random key lands on a random leaf of a big
//! index, which after a checkpoint costs a full-page image, and when the index outgrows the
//! cache, a read.

use std::time::{Duration, Instant};

use sqlx::{AssertSqlSafe, PgPool};

use inboxed_core::{ConsumerName, Envelope, MessageId, Outcome, Processor};
use inboxed_postgres::PgStore;

use crate::variants::{Credit, bench_store};

/// v4 against v7 keys at given sizes of the processed-keys table.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Keys already stored per kind (comma-separated); each size gets a fresh database.
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    rows: Vec<i64>,
    /// Concurrent workers (and pool size).
    #[arg(long, default_value_t = 8)]
    workers: usize,
    /// Seconds per kind per round.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Rounds; each runs both kinds, in alternating order.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

const ACCOUNTS: i64 = 100_000;

#[derive(Debug, Clone, Copy)]
enum Kind {
    V4,
    V7,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::V4 => "v4",
            Self::V7 => "v7",
        }
    }

    /// The SQL of a seeded key of this kind; v7 keys carry times before any live key's.
    fn seed_sql(self) -> &'static str {
        match self {
            Self::V4 => "gen_random_uuid()",
            Self::V7 => {
                "(lpad(to_hex(1700000000000 + g), 12, '0') || substr(md5(random()::text), 1, 20))::uuid"
            }
        }
    }

    fn fresh(self) -> MessageId {
        MessageId::from_uuid(match self {
            Self::V4 => uuid::Uuid::new_v4(),
            Self::V7 => uuid::Uuid::now_v7(),
        })
    }
}

/// One measurement: messages per second, WAL bytes and blocks read per message.
struct Measured {
    rate: f64,
    wal_per_msg: f64,
    reads_per_msg: f64,
}

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    println!(
        "workers {}, {} s per kind per round, {} rounds, processor one message per transaction",
        args.workers, args.seconds, args.rounds
    );
    println!();
    println!(
        "| stored keys per kind | kind | median msg/s | WAL bytes/msg | blocks read/msg | v4 / v7 (median of rounds) |"
    );
    println!("|---|---|---|---|---|---|");
    for &rows in &args.rows {
        let store = bench_store(server, args.workers, ACCOUNTS).await?;
        let pool = store.pool().clone();
        let mut processors = Vec::new();
        for kind in [Kind::V4, Kind::V7] {
            let handler = Credit { accounts: ACCOUNTS };
            let p = Processor::new(store.clone(), ConsumerName::new(kind.name())?, handler);
            p.ensure_ready().await?;
            let started = Instant::now();
            seed(&pool, kind, rows).await?;
            eprintln!(
                "seeded {rows} {} keys in {:.0} s",
                kind.name(),
                started.elapsed().as_secs_f64()
            );
            processors.push((kind, p));
        }
        // One statement per call: VACUUM refuses to run inside a multi-statement query.
        for sql in ["VACUUM ANALYZE inboxed_processed_messages", "CHECKPOINT"] {
            sqlx::raw_sql(sql).execute(&pool).await?;
        }
        let mut results: Vec<[Measured; 2]> = Vec::new();
        for round in 0..args.rounds {
            let mut pair = Vec::new();
            for k in 0..2 {
                let (kind, p) = &processors[(k + round) % 2];
                let m = measure(&pool, p, *kind, args.workers, args.seconds).await?;
                pair.push((*kind, m));
            }
            pair.sort_by_key(|(kind, _)| kind.name());
            let mut pair = pair.into_iter().map(|(_, m)| m);
            let (Some(v4), Some(v7)) = (pair.next(), pair.next()) else {
                unreachable!("two kinds measured");
            };
            eprintln!(
                "rows {rows}, round {}: v4 {:.0} msg/s, v7 {:.0} msg/s",
                round + 1,
                v4.rate,
                v7.rate
            );
            results.push([v4, v7]);
        }
        let ratio = crate::median(results.iter().map(|r| r[0].rate / r[1].rate).collect());
        for (i, kind) in [Kind::V4, Kind::V7].into_iter().enumerate() {
            let med =
                |f: fn(&Measured) -> f64| crate::median(results.iter().map(|r| f(&r[i])).collect());
            println!(
                "| {rows} | {} | {:.0} | {:.0} | {:.2} | {} |",
                kind.name(),
                med(|m| m.rate),
                med(|m| m.wal_per_msg),
                med(|m| m.reads_per_msg),
                if i == 0 {
                    format!("{ratio:.2}")
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(())
}

/// Inserts `rows` keys of `kind` for its consumer, through the table's indexes, in batches of
/// a million so that no single statement holds the whole load.
async fn seed(pool: &PgPool, kind: Kind, rows: i64) -> anyhow::Result<()> {
    let mut from = 1;
    while from <= rows {
        let to = (from + 999_999).min(rows);
        let sql = format!(
            "INSERT INTO inboxed_processed_messages (consumer_id, message_key, fingerprint, received_s)
             SELECT (SELECT id FROM inboxed_consumers WHERE name = '{name}'), uuid_send({key}),
                    ('x' || substr(md5(g::text), 1, 8))::bit(32)::integer,
                    extract(epoch FROM now())::integer - 1577836800 - ({rows} - g) / 1000
             FROM generate_series({from}, {to}) g",
            name = kind.name(),
            key = kind.seed_sql(),
        );
        sqlx::raw_sql(AssertSqlSafe(sql)).execute(pool).await?;
        from = to + 1;
    }
    Ok(())
}

async fn measure(
    pool: &PgPool,
    processor: &Processor<PgStore, Credit>,
    kind: Kind,
    workers: usize,
    seconds: f64,
) -> anyhow::Result<Measured> {
    let (wal0, reads0) = counters(pool).await?;
    let processor = processor.clone();
    let (n, elapsed) =
        crate::load::for_duration(workers, Duration::from_secs_f64(seconds), move || {
            let processor = processor.clone();
            async move {
                let env = Envelope::new(kind.fresh(), b"{\"credit\":1}".to_vec());
                let outcome = processor.process(&env, Some(1)).await?;
                anyhow::ensure!(outcome == Outcome::Processed, "{outcome:?}");
                Ok(1)
            }
        })
        .await?;
    let n = n as f64;
    let (wal1, reads1) = counters(pool).await?;
    Ok(Measured {
        rate: n / elapsed,
        wal_per_msg: (wal1 - wal0) as f64 / n.max(1.0),
        reads_per_msg: (reads1 - reads0) as f64 / n.max(1.0),
    })
}

/// WAL position (bytes) and blocks read by this database so far.
async fn counters(pool: &PgPool) -> anyhow::Result<(i64, i64)> {
    let row: (i64, i64) = sqlx::query_as(
        "SELECT (pg_current_wal_lsn() - '0/0')::bigint,
                (SELECT blks_read FROM pg_stat_database WHERE datname = current_database())",
    )
    .fetch_one(pool)
    .await?;
    Ok(row)
}
