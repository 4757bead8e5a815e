//! `inboxed-bench sizing`: bytes per row of the processed-keys table (heap and indexes) for
//! the current layout and compact candidates, at given row counts, with random (v4) and
//! time-ordered (v7-like) keys. Rows go in through the indexes one by one (one INSERT ... SELECT
//! in key order of generation, so random keys split index pages as live traffic does), each
//! with its own received time (equal times would let btree deduplication shrink a time index
//! far below what live traffic gives).

use std::time::Instant;

use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, PgPool};

/// Table layouts to size.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Row counts (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1000000")]
    rows: Vec<i64>,
    /// Layouts (comma-separated): plain and partition (what the migrations create), text (the
    /// layout before the compact keys), and the candidates uuid, compact, compact-notime, compact4.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "plain,partition,partition-hash,text,uuid,compact,compact-notime,compact4"
    )]
    layouts: Vec<String>,
    /// Key kinds (comma-separated): v4 (random), v7 (time-ordered).
    #[arg(long, value_delimiter = ',', default_value = "v4,v7")]
    keys: Vec<String>,
}

/// `(create statements, insert select)` of a layout; `{key}` is the key expression.
fn layout(name: &str) -> Option<(&'static str, &'static str)> {
    Some(match name {
        // The layout before the compact keys: text key, full SHA-256, btree on time.
        "text" => (
            "CREATE TABLE sz (consumer_name text NOT NULL, message_id text NOT NULL,
                 received_at timestamptz NOT NULL DEFAULT now(), message_type text,
                 correlation_id text, payload_hash bytea, PRIMARY KEY (consumer_name, message_id));
             CREATE INDEX sz_expiry ON sz (consumer_name, received_at);",
            "INSERT INTO sz (consumer_name, message_id, received_at, payload_hash)
             SELECT 'billing', ({key})::text, now() + g * interval '1 microsecond', sha256(g::text::bytea) FROM generate_series(1, {n}) g",
        ),
        // The same with a native uuid key.
        "uuid" => (
            "CREATE TABLE sz (consumer_name text NOT NULL, message_id uuid NOT NULL,
                 received_at timestamptz NOT NULL DEFAULT now(), message_type text,
                 correlation_id text, payload_hash bytea, PRIMARY KEY (consumer_name, message_id));
             CREATE INDEX sz_expiry ON sz (consumer_name, received_at);",
            "INSERT INTO sz (consumer_name, message_id, received_at, payload_hash)
             SELECT 'billing', {key}, now() + g * interval '1 microsecond', sha256(g::text::bytea) FROM generate_series(1, {n}) g",
        ),
        // Compact: consumer as a smallint id, uuid key, 8-byte payload fingerprint, BRIN on
        // the insertion-ordered time column, metadata columns dropped.
        "compact" => (
            "CREATE TABLE sz (consumer_id smallint NOT NULL, message_id uuid NOT NULL,
                 received_at timestamptz NOT NULL DEFAULT now(), fingerprint bytea NOT NULL,
                 PRIMARY KEY (consumer_id, message_id));
             CREATE INDEX sz_expiry ON sz USING brin (received_at);",
            "INSERT INTO sz (consumer_id, message_id, received_at, fingerprint)
             SELECT 1, {key}, now() + g * interval '1 microsecond', substr(sha256(g::text::bytea), 1, 8) FROM generate_series(1, {n}) g",
        ),
        // Compact without any time index: time lives in the partition (partitioned mode).
        "compact-notime" => (
            "CREATE TABLE sz (consumer_id smallint NOT NULL, message_id uuid NOT NULL,
                 received_at timestamptz NOT NULL DEFAULT now(), fingerprint bytea NOT NULL,
                 PRIMARY KEY (consumer_id, message_id));",
            "INSERT INTO sz (consumer_id, message_id, received_at, fingerprint)
             SELECT 1, {key}, now() + g * interval '1 microsecond', substr(sha256(g::text::bytea), 1, 8) FROM generate_series(1, {n}) g",
        ),
        // Narrowest: 4-byte fingerprint and 4-byte received second (since 2020) as integers,
        // no varlena headers, columns ordered so nothing is padded: 28 bytes of data a row;
        // the key index packs its pages full when keys arrive in order (fillfactor 100).
        "compact4" => (
            "CREATE TABLE sz (message_id uuid NOT NULL, consumer_id smallint NOT NULL,
                 fingerprint integer NOT NULL, received_s integer NOT NULL,
                 PRIMARY KEY (consumer_id, message_id) WITH (fillfactor = 100));
             CREATE INDEX sz_expiry ON sz USING brin (received_s);",
            "INSERT INTO sz (message_id, consumer_id, fingerprint, received_s)
             SELECT {key}, 1, ('x' || substr(md5(g::text), 1, 8))::bit(32)::integer,
                    extract(epoch FROM now())::integer - 1577836800 + g / 1000 FROM generate_series(1, {n}) g",
        ),
        // The layout migrations 1 and 4 create: compact key (a UUID's 16 bytes), registered
        // consumer id, 4-byte fingerprint and second, btree on (consumer_id, received_s).
        "plain" => (
            "CREATE TABLE sz (consumer_id integer NOT NULL, received_s integer NOT NULL,
                 fingerprint integer, message_key bytea NOT NULL,
                 PRIMARY KEY (consumer_id, message_key) WITH (fillfactor = 100));
             CREATE INDEX sz_expiry ON sz (consumer_id, received_s);",
            ADOPTED_INSERT,
        ),
        // One partition of migration 5's table: the same columns, a plain key index, and a BRIN
        // on received_s instead of the btree (partitions are dropped whole, never purged).
        "partition" => (
            "CREATE TABLE sz (consumer_id integer NOT NULL, received_s integer NOT NULL,
                 fingerprint integer, message_key bytea NOT NULL);
             CREATE INDEX sz_key ON sz (consumer_id, message_key) WITH (fillfactor = 100);
             CREATE INDEX sz_received ON sz USING brin (received_s)
                 WITH (pages_per_range = 32, autosummarize = on);",
            ADOPTED_INSERT,
        ),
        // A partition with the key probed through a hash index (4-byte hash codes, whatever
        // the key's order) and the consumers found through a btree on consumer_id alone, which
        // btree deduplication shrinks to a posting list per consumer.
        "partition-hash" => (
            "CREATE TABLE sz (consumer_id integer NOT NULL, received_s integer NOT NULL,
                 fingerprint integer, message_key bytea NOT NULL);
             CREATE INDEX sz_key ON sz USING hash (message_key);
             CREATE INDEX sz_consumer ON sz (consumer_id);
             CREATE INDEX sz_received ON sz USING brin (received_s)
                 WITH (pages_per_range = 32, autosummarize = on);",
            ADOPTED_INSERT,
        ),
        _ => return None,
    })
}

/// Rows of the adopted layouts: a UUID key as migration 1's message_key() stores it.
const ADOPTED_INSERT: &str = "INSERT INTO sz (consumer_id, message_key, fingerprint, received_s)
     SELECT 1, uuid_send({key}), ('x' || substr(md5(g::text), 1, 8))::bit(32)::integer,
            extract(epoch FROM now())::integer - 1577836800 + g / 1000
     FROM generate_series(1, {n}) g";

fn key(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "v4" => "gen_random_uuid()",
        // 48 bits of milliseconds-like order (the series number), then random bits.
        "v7" => {
            "(lpad(to_hex(1700000000000 + g), 12, '0') || substr(md5(random()::text), 1, 20))::uuid"
        }
        _ => return None,
    })
}

pub(crate) async fn run(server: &str, args: Args) -> anyhow::Result<()> {
    let url = crate::fresh_database(server).await?;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await?;
    println!("| layout | keys | rows | heap B/row | indexes B/row | total B/row | load s |");
    println!("|---|---|---|---|---|---|---|");
    for &n in &args.rows {
        for name in &args.layouts {
            let (create, insert) =
                layout(name).ok_or_else(|| anyhow::anyhow!("unknown layout {name}"))?;
            for kind in &args.keys {
                let k = key(kind).ok_or_else(|| anyhow::anyhow!("unknown key kind {kind}"))?;
                let (heap, idx, secs) = measure(&pool, create, insert, k, n).await?;
                let per = |b: i64| b as f64 / n as f64;
                println!(
                    "| {name} | {kind} | {n} | {:.0} | {:.0} | {:.0} | {secs:.0} |",
                    per(heap),
                    per(idx),
                    per(heap + idx)
                );
            }
        }
    }
    Ok(())
}

async fn measure(
    pool: &PgPool,
    create: &str,
    insert: &str,
    key: &str,
    n: i64,
) -> anyhow::Result<(i64, i64, f64)> {
    sqlx::raw_sql("DROP TABLE IF EXISTS sz")
        .execute(pool)
        .await?;
    sqlx::raw_sql(AssertSqlSafe(create.to_owned()))
        .execute(pool)
        .await?;
    let started = Instant::now();
    let sql = insert.replace("{key}", key).replace("{n}", &n.to_string());
    sqlx::raw_sql(AssertSqlSafe(sql)).execute(pool).await?;
    let secs = started.elapsed().as_secs_f64();
    sqlx::raw_sql("VACUUM ANALYZE sz").execute(pool).await?;
    let (heap, idx): (i64, i64) = sqlx::query_as(
        "SELECT pg_relation_size('sz') + pg_relation_size('sz', 'fsm') + pg_relation_size('sz', 'vm'),
                pg_indexes_size('sz')",
    )
    .fetch_one(pool)
    .await?;
    Ok((heap, idx, secs))
}
