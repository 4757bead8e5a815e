//! `inboxed purge`: forgets processed keys older than a consumer's window, in bounded batches.
//! A dry run unless given `--yes`.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;

use inboxed_core::ConsumerName;
use inboxed_core::retention::{Purger, PurgerConfig, Retention, RetentionStore};

use super::AnyStore;
use super::database::DbArgs;
use super::duration::{parse_duration, show};

/// A dry run counts at most this many expired keys.
const DRY_RUN_CAP: u64 = 10_000_000;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArgs,
    /// The consumer whose keys to purge.
    #[arg(long)]
    consumer: String,
    /// Keep keys received within this window (for example 30d, 12h, 90m).
    #[arg(long, value_parser = parse_duration)]
    window: Duration,
    #[command(flatten)]
    horizon: HorizonArgs,
    /// Keys per delete, each in its own short transaction.
    #[arg(long, default_value_t = PurgerConfig::default().batch_size)]
    batch_size: u32,
    /// Pause between batches (with ±50% jitter): `10ms`, `1s`.
    #[arg(long, value_parser = parse_duration, default_value = "10ms")]
    pause: Duration,
    /// Delete. Without it, only report what would be deleted.
    #[arg(long)]
    yes: bool,
    /// One JSON object instead of a sentence: `dry_run`, `consumer`, `window_seconds`, and
    /// `expired_keys` (a dry run, with `at_least` when the count stopped at its cap),
    /// `deleted_keys`, or `partitions_dropped`/`_kept`/`_created`, and `seconds`.
    #[arg(long)]
    json: bool,
}

/// The rule that protects dedup, for every command that forgets keys: a window must cover the
/// horizon plus a margin.
#[derive(Debug, clap::Args)]
pub(crate) struct HorizonArgs {
    /// The longest a message can come back after its first delivery: broker redelivery
    /// limits, dead-letter replays, offset resets. A window shorter than this plus the margin
    /// is refused.
    #[arg(long, value_parser = parse_duration)]
    horizon: Duration,
    /// Slack on top of the horizon.
    #[arg(long, value_parser = parse_duration, default_value = "1d")]
    margin: Duration,
    /// Accept a window shorter than horizon plus margin: late redeliveries are then processed
    /// again.
    #[arg(long)]
    allow_short_window: bool,
}

impl HorizonArgs {
    /// The retention of `window` under this rule (not checked yet).
    pub(crate) fn retention(&self, window: Duration) -> Retention {
        Retention::new(window, self.horizon)
            .margin(self.margin)
            .allow_short_window(self.allow_short_window)
    }
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let consumer = ConsumerName::new(args.consumer.clone())?;
    let retention = args.horizon.retention(args.window);
    retention.check(&consumer)?;
    let config = PurgerConfig::default()
        .batch_size(args.batch_size)
        .pause(args.pause);
    let now = SystemTime::now();
    let cutoff = now
        .checked_sub(args.window)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let store = args.db.connect(2).await?;
    match &store {
        AnyStore::Postgres(s) => {
            purge(s, &args, consumer, retention, config, cutoff, now, out).await
        }
        AnyStore::Sqlite(s) => purge(s, &args, consumer, retention, config, cutoff, now, out).await,
        AnyStore::MySql(s) => purge(s, &args, consumer, retention, config, cutoff, now, out).await,
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "one call site per backend, same arguments"
)]
async fn purge<S: RetentionStore + Clone>(
    store: &S,
    args: &Args,
    consumer: ConsumerName,
    retention: Retention,
    config: PurgerConfig,
    cutoff: SystemTime,
    now: SystemTime,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let window = show(args.window);
    let report_json = |fields: serde_json::Value| {
        let mut line = json!({ "dry_run": !args.yes, "consumer": consumer.as_str(),
            "window_seconds": args.window.as_secs() });
        if let (Some(line), Some(fields)) = (line.as_object_mut(), fields.as_object()) {
            line.extend(fields.clone());
        }
        line
    };
    if !args.yes {
        let n = store.count_expired(&consumer, cutoff, DRY_RUN_CAP).await?;
        if args.json {
            let line = report_json(json!({ "expired_keys": n, "at_least": n >= DRY_RUN_CAP }));
            writeln!(out, "{line}")?;
            return Ok(ExitCode::SUCCESS);
        }
        let at_least = if n >= DRY_RUN_CAP { "at least " } else { "" };
        writeln!(
            out,
            "dry run: {at_least}{n} keys of consumer `{consumer}` are older than {window}; \
             run again with --yes to delete them"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let purger = Purger::new(store.clone(), config).consumer(consumer.clone(), retention)?;
    let started = Instant::now();
    // On stderr, and drawn only when it is a terminal: scripts see the final line alone.
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(200));
    let report = purger
        .purge_once(now, |c, total| {
            bar.set_message(format!("{c}: {total} keys deleted so far"));
        })
        .await;
    bar.finish_and_clear();
    let report = report?;
    let secs = started.elapsed().as_secs_f64();
    if args.json {
        let parts = &report.partitions;
        let fields = if store.partitioned() {
            json!({ "partitions_dropped": parts.dropped, "partitions_kept": parts.kept,
                "partitions_created": parts.created, "skipped": parts.skipped,
                "seconds": secs })
        } else {
            json!({ "deleted_keys": report.total(), "seconds": secs })
        };
        writeln!(out, "{}", report_json(fields))?;
        return Ok(if parts.skipped {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        });
    }
    if store.partitioned() {
        let parts = report.partitions;
        if parts.skipped {
            return super::partitions::busy(out);
        }
        writeln!(
            out,
            "partitions of keys older than {window}: dropped {}, kept {} (they hold keys of \
             consumers not named here, or inside their window), created ahead {}, in {secs:.1} s",
            parts.dropped, parts.kept, parts.created
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let total = report.total();
    writeln!(
        out,
        "deleted {total} keys of consumer `{consumer}` older than {window} in {secs:.1} s ({:.0} keys/s)",
        total as f64 / secs.max(1e-9)
    )?;
    Ok(ExitCode::SUCCESS)
}
