//! `inboxed migrate`.

use std::io::Write;
use std::process::ExitCode;

use super::database::{DbArgs, redact};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArgs,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let store = args.db.connect(2).await?;
    let applied = store.migrate().await?;
    let url = redact(&args.db.database_url);
    if applied.is_empty() {
        writeln!(out, "{url}: inbox tables are up to date")?;
    } else {
        writeln!(out, "{url}: applied migrations {applied:?}")?;
    }
    Ok(ExitCode::SUCCESS)
}
