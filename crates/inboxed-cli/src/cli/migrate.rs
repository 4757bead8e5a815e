//! `inboxed migrate`.

use std::io::Write;
use std::process::ExitCode;

use super::AnyStore;
use super::database::redact;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Database URL: postgres://… or sqlite://path (a plain path is taken as SQLite).
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let store = AnyStore::connect(&args.database_url, 2).await?;
    let applied = store.migrate().await?;
    if applied.is_empty() {
        writeln!(
            out,
            "{}: inbox tables are up to date",
            redact(&args.database_url)
        )?;
    } else {
        writeln!(
            out,
            "{}: applied migrations {applied:?}",
            redact(&args.database_url)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
