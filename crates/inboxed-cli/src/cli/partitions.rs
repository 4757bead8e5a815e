//! `inboxed partitions`: the processed-keys partitions of the partitioned mode (PostgreSQL,
//! MySQL and MariaDB).

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::bail;
use serde_json::json;

use inboxed_core::ConsumerName;
use inboxed_core::retention::RetentionStore;

use super::AnyStore;
use super::database::DbArgs;
use super::duration::parse_duration;
use super::purge::HorizonArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Each partition: its time range, state and size.
    List {
        #[command(flatten)]
        db: DbArgs,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Create the partitions missing ahead of now (needs --partition-interval).
    CreateAhead {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Detach and drop the partitions every consumer in them is done with: a partition goes
    /// only when each consumer with keys in it has a --window here that has passed over it.
    /// Lists what would go and what stays (and why) unless given --yes. `inboxed purge` does
    /// the same for the one consumer it names.
    DropExpired {
        #[command(flatten)]
        db: DbArgs,
        /// A consumer's retention window, as CONSUMER=DURATION (billing=30d); repeat it for
        /// each consumer whose keys share the table.
        #[arg(long = "window", value_parser = parse_window, required = true)]
        windows: Vec<(ConsumerName, Duration)>,
        #[command(flatten)]
        horizon: HorizonArgs,
        /// Drop. Without it, only list what would be dropped.
        #[arg(long)]
        yes: bool,
    },
}

/// Another process holds the maintenance lock: nothing was done, which is not a success.
pub(crate) fn busy(out: &mut impl Write) -> anyhow::Result<ExitCode> {
    writeln!(
        out,
        "another process is maintaining the partitions; nothing was done: run again later"
    )?;
    Ok(ExitCode::from(1))
}

/// `CONSUMER=DURATION`.
fn parse_window(text: &str) -> Result<(ConsumerName, Duration), String> {
    let (consumer, window) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: use CONSUMER=DURATION, e.g. billing=30d"))?;
    let consumer = ConsumerName::new(consumer).map_err(|e| e.to_string())?;
    Ok((consumer, parse_duration(window)?))
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::List { db, json } => match db.connect_existing(2).await? {
            AnyStore::Postgres(store) => list_postgres(&store, json, out).await,
            AnyStore::MySql(store) => list_mysql(&store, json, out).await,
            AnyStore::Sqlite(_) => bail!(NO_PARTITIONS),
        },
        Action::CreateAhead { db } => {
            // No windows declared: nothing is old enough to drop, so this only creates.
            let report = match partitioned(db.connect_existing(2).await?)? {
                AnyStore::Postgres(s) => s.maintain_partitions(SystemTime::now(), &[]).await?,
                AnyStore::MySql(s) => s.maintain_partitions(SystemTime::now(), &[]).await?,
                AnyStore::Sqlite(_) => bail!(NO_PARTITIONS),
            };
            if report.skipped {
                return busy(out);
            }
            writeln!(out, "created {} partition(s) ahead", report.created)?;
            Ok(ExitCode::SUCCESS)
        }
        Action::DropExpired {
            db,
            windows,
            horizon,
            yes,
        } => {
            for (consumer, window) in &windows {
                horizon.retention(*window).check(consumer)?;
            }
            let store = partitioned(db.connect_existing(2).await?)?;
            let now = SystemTime::now();
            if yes {
                let report = match store {
                    AnyStore::Postgres(s) => s.maintain_partitions(now, &windows).await?,
                    AnyStore::MySql(s) => s.maintain_partitions(now, &windows).await?,
                    AnyStore::Sqlite(_) => bail!(NO_PARTITIONS),
                };
                if report.skipped {
                    return busy(out);
                }
                writeln!(
                    out,
                    "dropped {} partition(s), kept {} (their consumers' windows have not all \
                     passed over them), created {} ahead",
                    report.dropped, report.kept, report.created
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            // (name, keys before, why kept)
            let plan: Vec<(String, String, Option<String>)> = match store {
                AnyStore::Postgres(s) => s
                    .partitions_expiry_plan(now, &windows)
                    .await?
                    .into_iter()
                    .map(|p| (p.name, p.to.map_or_else(|| "-".to_owned(), utc), p.keep))
                    .collect(),
                AnyStore::MySql(s) => s
                    .partitions_expiry_plan(now, &windows)
                    .await?
                    .into_iter()
                    .map(|(p, keep)| (p.name, p.upper_ms.map_or_else(|| "-".to_owned(), ms), keep))
                    .collect(),
                AnyStore::Sqlite(_) => bail!(NO_PARTITIONS),
            };
            for (name, to, keep) in &plan {
                match keep {
                    None => writeln!(out, "would drop {name} (keys before {to})")?,
                    Some(why) => writeln!(out, "keep {name} (keys before {to}): {why}")?,
                }
            }
            let dropped = plan.iter().filter(|p| p.2.is_none()).count();
            writeln!(
                out,
                "dry run: {dropped} partition(s) would be dropped, {} kept; run again with --yes",
                plan.len() - dropped
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

const NO_PARTITIONS: &str = "partitions are a PostgreSQL and MySQL feature; SQLite keeps keys \
                             in one table";

/// `store`, refused unless it was built partitioned (from --partition-interval).
fn partitioned(store: AnyStore) -> anyhow::Result<AnyStore> {
    let on = match &store {
        AnyStore::Postgres(s) => RetentionStore::partitioned(s),
        AnyStore::MySql(s) => RetentionStore::partitioned(s),
        AnyStore::Sqlite(_) => bail!(NO_PARTITIONS),
    };
    if !on {
        bail!("give --partition-interval (the length the application partitions by)");
    }
    Ok(store)
}

async fn list_postgres(
    store: &inboxed_postgres::PgStore,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let parts = store.partitions_list().await?;
    for p in &parts {
        let (from, to) = (p.from.map(utc), p.to.map(utc));
        if json {
            let line = json!({ "partition": p.name, "from": from, "to": to,
                "state": p.state, "bytes": p.bytes });
            writeln!(out, "{line}")?;
        } else {
            writeln!(
                out,
                "{:<48} {:>20} .. {:<20} {:<9} {:>12} bytes",
                p.name,
                from.as_deref().unwrap_or("-"),
                to.as_deref().unwrap_or("-"),
                p.state,
                p.bytes
            )?;
        }
    }
    if !json {
        writeln!(out, "{} partition(s)", parts.len())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// MySQL's partitions hold the keys whose id's time falls between the bound before and their
/// own (`p1`: ids without a time; `pMAX`: past the last bound).
async fn list_mysql(
    store: &inboxed_mysql::MySqlStore,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let parts = store.partitions().await?;
    let mut from: Option<i64> = None;
    for p in &parts {
        let (lo, hi) = (
            from.filter(|&f| f > 1).map(ms),
            p.upper_ms.filter(|&u| u > 1).map(ms),
        );
        if json {
            let line = json!({ "partition": p.name, "from": lo, "to": hi,
                "state": "attached", "rows_estimate": p.rows });
            writeln!(out, "{line}")?;
        } else {
            writeln!(
                out,
                "{:<24} {:>20} .. {:<20} {:>12} rows (estimate)",
                p.name,
                lo.as_deref().unwrap_or("-"),
                hi.as_deref().unwrap_or("-"),
                p.rows
            )?;
        }
        from = p.upper_ms;
    }
    if !json {
        writeln!(out, "{} partition(s)", parts.len())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Milliseconds since the epoch as [`utc`] writes them.
fn ms(at: i64) -> String {
    utc(UNIX_EPOCH + Duration::from_millis(u64::try_from(at).unwrap_or(0)))
}

/// `YYYY-MM-DDTHH:MM:SSZ`, from days since the epoch by the civil calendar.
fn utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = i64::try_from(days).unwrap_or(0) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn utc_dates_follow_the_calendar() {
        let at = |s| super::utc(super::UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01T00:00:00Z");
        assert_eq!(at(1_577_836_800), "2020-01-01T00:00:00Z");
        assert_eq!(at(1_709_164_800 + 3_661), "2024-02-29T01:01:01Z");
    }
}
