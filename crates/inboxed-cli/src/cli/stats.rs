//! `inboxed stats`: size, growth and age of one consumer's processed keys.

use std::io::Write;
use std::process::ExitCode;
use std::time::SystemTime;

use inboxed_core::ConsumerName;
use inboxed_core::retention::store::ProcessedStats;

use super::database::DbArgs;
use super::duration::show;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArgs,
    /// The consumer to report on.
    #[arg(long)]
    consumer: String,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let consumer = ConsumerName::new(args.consumer.clone())?;
    let store = args.db.connect(2).await?;
    let stats = store.processed_stats(&consumer).await?;
    write_stats(out, &consumer, &stats)?;
    Ok(ExitCode::SUCCESS)
}

fn write_stats(
    out: &mut impl Write,
    consumer: &ConsumerName,
    stats: &ProcessedStats,
) -> std::io::Result<()> {
    let rows = stats.estimated_rows.map_or_else(
        || "unknown (not analyzed yet)".to_owned(),
        |n| n.to_string(),
    );
    let oldest = stats.oldest.map_or_else(
        || "none".to_owned(),
        |t| {
            let age = SystemTime::now().duration_since(t).unwrap_or_default();
            show(std::time::Duration::from_secs(age.as_secs()))
        },
    );
    writeln!(out, "consumer `{consumer}`")?;
    writeln!(out, "  estimated keys     {rows}")?;
    writeln!(
        out,
        "  growth             {} keys/hour (last minute's rate)",
        stats.growth_per_hour()
    )?;
    writeln!(out, "  oldest key age     {oldest}")?;
    writeln!(
        out,
        "  table bytes        {} (all consumers)",
        stats.table_bytes
    )?;
    writeln!(
        out,
        "  index bytes        {} (all consumers)",
        stats.index_bytes
    )?;
    Ok(())
}
