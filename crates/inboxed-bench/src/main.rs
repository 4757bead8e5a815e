//! `inboxed-bench`: benchmarks that compare inboxed with a baseline measured in the same run.
//! Machines are noisy, so results are ratios (medians of per-round ratios), not absolute rates.
//!
//! Run with:
//! `cargo run --release -p inboxed-bench -- all` (the whole suite; rewrites docs/bench/runs.md)
//! `cargo run --release -p inboxed-bench -- processor`
//! `cargo run --release -p inboxed-bench -- batch`
//! `cargo run --release -p inboxed-bench -- ids`
//! `cargo run --release -p inboxed-bench -- inbox` (add `--quick` for the CI smoke run)
//! `cargo run --release -p inboxed-bench -- receipt` (add `--quick` for the CI smoke run)
//! `cargo run --release -p inboxed-bench -- defaults` (add `--quick` for the CI smoke run)
//! `cargo run --release -p inboxed-bench -- recovery` (add `--quick` for the CI smoke run)
//! `cargo run --release -p inboxed-bench -- retention`
//! `cargo run --release -p inboxed-bench -- sizing --rows 1000000,10000000`
//! `cargo run --release -p inboxed-bench -- rabbitmq`
//! `cargo run --release -p inboxed-bench -- relay`
//! `cargo run --release -p inboxed-bench -- memory`
//! `cargo run --release -p inboxed-bench -- outbox`
//! `cargo run --release -p inboxed-bench -- mysql` (add `--quick` for the CI smoke run)
//! `cargo run --release -p inboxed-bench -- mysql-inbox`
//! `cargo run --release -p inboxed-bench -- mysql-defaults` (add `--quick` for the CI smoke run)
//! `cargo run --release -p inboxed-bench -- restart` (RabbitMQ and NATS; about 10 minutes)
//! `cargo run --release -p inboxed-bench -- trace` (add `--quick` for the CI smoke run)

#![allow(clippy::print_stdout)]

mod all;
mod batch;
mod cpu;
mod defaults;
mod ids;
mod inbox;
mod load;
mod memory;
mod mysql;
mod mysql_defaults;
mod mysql_inbox;
mod outbox;
mod peer;
mod plot;
mod policy;
mod processor;
mod rabbitmq;
mod receipt;
mod recovery;
mod relay;
mod restart;
mod retention;
mod sizing;
mod trace;
mod variants;
mod variants_diesel;
mod variants_sea_orm;
mod variants_tokio;
mod variants_worker;

use clap::{Parser, Subcommand};
use sqlx::{Connection, PgConnection};

#[derive(Debug, Parser)]
struct Cli {
    /// Server to create the benchmark database on.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@localhost:5432/postgres",
        global = true
    )]
    database_url: String,
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Debug, Subcommand)]
enum Bench {
    /// The whole suite, one scenario after another; rewrites docs/bench/runs.md's generated
    /// sections and its charts.
    All(all::Args),
    /// One message per transaction: processor against the same statements through sqlx.
    Processor(processor::Args),
    /// Batched processor at several batch sizes against one message per transaction and
    /// against a consumer without dedup.
    Batch(batch::Args),
    /// Random (v4) against time-ordered (v7) ids with millions of keys already stored.
    Ids(ids::Args),
    /// Store-then-process: workers against bare claim-and-complete loops, and pickup latency.
    Inbox(inbox::Args),
    /// Store-then-process with the defaults (only `handle`, default settings) at 1, 4 and 16
    /// workers, beside a batch handler.
    Defaults(defaults::Args),
    /// Receipt: `Inbox::store_many` at several batch sizes against `Inbox::store`.
    Receipt(receipt::Args),
    /// Recovery: a drain by two worker processes with one of them SIGKILLed three times,
    /// against the same drain without kills.
    Recovery(recovery::Args),
    /// One worker process of `recovery` (started by it).
    #[command(hide = true)]
    RecoveryWorker(recovery::WorkerArgs),
    /// Retention: hot-path latency with and without a concurrent purge, purge rate, and the
    /// time to drop a partition of expired keys.
    Retention(retention::Args),
    /// Bytes per row of the processed-keys table: today's layout against compact ones.
    Sizing(sizing::Args),
    /// RabbitMQ → processor → PostgreSQL at several prefetch settings, against the same
    /// consumer acking after the business update alone.
    Rabbitmq(rabbitmq::Args),
    /// The relay's receipt from RabbitMQ: its defaults (batches) against one store per
    /// delivery.
    Relay(relay::Args),
    /// Resident memory of a RabbitMQ consumer while it drains a queue.
    Memory(memory::Args),
    /// The outbox: the relay against raw confirmed publishing (RabbitMQ, NATS), a handler
    /// with one outbox row against the same without, and commit-to-confirm latency.
    Outbox(outbox::Args),
    /// The processor on MySQL or MariaDB against the same claim through sqlx, one message per
    /// transaction, and its batches against its single messages.
    Mysql(mysql::Args),
    /// Store-then-process workers on MySQL or MariaDB against bare claim loops of the same
    /// protocol (lease and lock-held).
    MysqlInbox(mysql_inbox::Args),
    /// Store-then-process workers on MySQL or MariaDB with the defaults, by worker count.
    MysqlDefaults(mysql_defaults::Args),
    /// The first minute after a consumer restarts (SIGTERM, or SIGKILL) on a RabbitMQ quorum
    /// queue or NATS, against a minute of steady state.
    Restart(restart::Args),
    /// The outage policy (kill switch, ladder) at the defaults: its cost when nothing fails
    /// against `KillSwitch::off()`, and the drain after a downstream outage against a clean one.
    Policy(policy::Args),
    /// Tracing's cost: the processor and an outbox write with no subscriber, with
    /// OpenTelemetry and no exporter, and with an exporter.
    Trace(trace::Args),
    /// inboxed's store-then-process worker against pgmq on the same server and workload:
    /// jobs/s, and client CPU, server CPU, commits and WAL bytes a job; receipt against
    /// pgmq's `send_batch`.
    Peer(peer::Args),
    /// One consumer process of `restart` (started by it).
    #[command(hide = true)]
    RestartConsumer(restart::ConsumerArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.bench {
        Bench::All(args) => all::run(&cli.database_url, args).await,
        Bench::Processor(args) => processor::run(&cli.database_url, args).await,
        Bench::Batch(args) => batch::run(&cli.database_url, args).await,
        Bench::Ids(args) => ids::run(&cli.database_url, args).await,
        Bench::Receipt(args) => receipt::run(&cli.database_url, args).await,
        Bench::Defaults(args) => defaults::run(&cli.database_url, args).await,
        Bench::Recovery(args) => recovery::run(&cli.database_url, args).await,
        Bench::RecoveryWorker(args) => recovery::worker(args).await,
        Bench::Inbox(args) => inbox::run(&cli.database_url, args).await,
        Bench::Retention(args) => retention::run(&cli.database_url, args).await,
        Bench::Sizing(args) => sizing::run(&cli.database_url, args).await,
        Bench::Rabbitmq(args) => rabbitmq::run(&cli.database_url, args).await,
        Bench::Policy(args) => policy::run(&cli.database_url, args).await,
        Bench::Relay(args) => relay::run(&cli.database_url, args).await,
        Bench::Memory(args) => memory::run(&cli.database_url, args).await,
        Bench::Outbox(args) => outbox::run(&cli.database_url, args).await,
        Bench::Mysql(args) => mysql::run(args).await,
        Bench::MysqlInbox(args) => mysql_inbox::run(args).await,
        Bench::MysqlDefaults(args) => mysql_defaults::run(args).await,
        Bench::Restart(args) => restart::run(&cli.database_url, args).await,
        Bench::RestartConsumer(args) => restart::consumer(args).await,
        Bench::Trace(args) => trace::run(&cli.database_url, args).await,
        Bench::Peer(args) => peer::run(&cli.database_url, args).await,
    }
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The median over the rounds run at `workers` of `f` of each round's rates (rounds are
/// `(workers, rates)`, in the order they ran).
pub(crate) fn median_at<const N: usize>(
    rounds: &[(usize, [f64; N])],
    workers: usize,
    f: impl Fn(&[f64; N]) -> f64,
) -> f64 {
    median(
        rounds
            .iter()
            .filter(|(w, _)| *w == workers)
            .map(|(_, r)| f(r))
            .collect(),
    )
}

/// Drops and recreates `inboxed_bench` on the server, returning its URL.
pub(crate) async fn fresh_database(server: &str) -> anyhow::Result<String> {
    let mut admin = PgConnection::connect(server).await?;
    sqlx::query("DROP DATABASE IF EXISTS inboxed_bench WITH (FORCE)")
        .execute(&mut admin)
        .await?;
    sqlx::query("CREATE DATABASE inboxed_bench")
        .execute(&mut admin)
        .await?;
    let (base, _) = server.rsplit_once('/').unwrap_or((server, ""));
    Ok(format!("{base}/inboxed_bench"))
}
