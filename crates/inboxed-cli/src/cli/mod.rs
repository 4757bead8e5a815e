//! Command-line parsing and dispatch. Flags map onto the library's own config structs.

mod daemon;
mod database;
mod dead_letters;
mod demo;
mod duration;
mod migrate;
mod outbox;
mod partitions;
mod prometheus_text;
mod purge;
mod relay;
mod replay;
mod scrape;
mod serve;
mod stats;
mod tenant;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub(crate) use database::AnyStore;

/// Exactly-once processing on top of at-least-once delivery: the inbox pattern.
///
/// Exit codes: 0 success; 1 the command ran and found a problem (the demo's ledger did not
/// match, `migrate --status` found pending migrations); 2 the command could not run (bad
/// arguments, database unreachable).
#[derive(Debug, Parser)]
#[command(name = "inboxed", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format on stderr: `text` or `json` (one object per line). The level filter is
    /// `INBOXED_LOG` (e.g. `info`, `inboxed=debug`).
    #[arg(long, global = true, env = "INBOXED_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub(crate) log_format: String,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create or upgrade the inbox tables (processed messages, dead letters, attempts).
    /// Running it again is a no-op.
    Migrate(migrate::Args),
    /// Run the real processor through a simulated at-least-once broker that injects producer
    /// retries, concurrent redeliveries, crashes before and after commit and poison messages,
    /// then check the ledger against the expected balances.
    Demo(demo::Args),
    /// Delete processed keys older than a consumer's retention window, in bounded batches.
    /// A dry run (a count) unless given --yes.
    Purge(purge::Args),
    /// The store-then-process backlog (pending, in flight, dead, oldest pending age, expired
    /// leases) and dead letters of every consumer, and the processed keys (count, growth,
    /// oldest age, table size) of the consumers named or seen. `--json` for scripts, `--watch`
    /// to refresh.
    Stats(stats::Args),
    /// Move a broker's messages into the store-then-process inbox table: store, commit, then
    /// ack. Workers (this library's, or any language's per docs/inbox-contract.md) process the
    /// rows. Runs until SIGTERM or SIGINT (Ctrl-C), then settles what it holds.
    Relay(relay::Args),
    /// Serve Prometheus metrics read from the database (backlog by status, oldest pending age,
    /// expired leases, dead letters, processed keys) at /metrics, and a health check at
    /// /health (200 when the database answers and its migrations are current, else 503).
    /// Runs until SIGTERM or SIGINT (Ctrl-C).
    Serve(serve::Args),
    /// List, show, retry or discard dead letters by id. `retry` stores them into their
    /// consumer's store-then-process inbox; `retry` and `discard` are dry runs without --yes.
    DeadLetters(dead_letters::Args),
    /// Reset dead store-then-process rows to pending (with --include-done, done rows too: a
    /// re-drive that applies their effect again), writing an audit record. A dry run without
    /// --yes.
    Replay(replay::Args),
    /// PostgreSQL's processed-keys partitions: list them, create the ones missing ahead, drop
    /// the expired ones.
    Partitions(partitions::Args),
    /// The transactional outbox: `relay` publishes committed outbox rows to the broker, each
    /// marked sent only after the broker confirmed it (docs/outbox.md).
    Outbox(outbox::Args),
}

impl Cli {
    /// Log filter when `INBOXED_LOG` is unset. The demo injects failures on purpose, so the
    /// warnings they cause are expected there and would bury its report.
    pub(crate) fn default_log_filter(&self) -> &'static str {
        match self.command {
            Command::Demo(_) => "error",
            Command::Migrate(_)
            | Command::Purge(_)
            | Command::Stats(_)
            | Command::DeadLetters(_)
            | Command::Replay(_)
            | Command::Partitions(_) => "warn",
            Command::Relay(_) | Command::Serve(_) | Command::Outbox(_) => "info",
        }
    }
}

/// Runs one command, writing its report to `out`.
pub(crate) async fn run(cli: Cli, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Migrate(args) => migrate::run(args, out).await,
        Command::Demo(args) => demo::run(args, out).await,
        Command::Purge(args) => purge::run(args, out).await,
        Command::Stats(args) => stats::run(args, out).await,
        Command::Relay(args) => relay::run(args, out).await,
        Command::Serve(args) => serve::run(args, out).await,
        Command::DeadLetters(args) => dead_letters::run(args, out).await,
        Command::Replay(args) => replay::run(args, out).await,
        Command::Partitions(args) => partitions::run(args, out).await,
        Command::Outbox(args) => outbox::run(args, out).await,
    }
}
