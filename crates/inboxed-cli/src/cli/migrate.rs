//! `inboxed migrate`.

use std::io::Write;
use std::process::ExitCode;

use serde_json::json;

use super::database::DbArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArgs,
    /// Only report which migrations are applied and which are pending; change nothing. Exits
    /// 1 when some are pending.
    #[arg(long)]
    status: bool,
    /// One JSON object: {"database", "applied", "pending"} (version numbers).
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let (applied, pending) = if args.status {
        let store = args.db.connect_existing(2).await?;
        (Vec::new(), store.pending_migrations().await?)
    } else {
        let store = args.db.connect(2).await?;
        (store.migrate().await?, Vec::new())
    };
    let url = args.db.shown_url();
    if args.json {
        let line = json!({ "database": url, "applied": applied, "pending": pending });
        writeln!(out, "{line}")?;
    } else if !pending.is_empty() {
        writeln!(
            out,
            "{url}: pending migrations {pending:?} (run inboxed migrate)"
        )?;
    } else if !applied.is_empty() {
        writeln!(out, "{url}: applied migrations {applied:?}")?;
    } else {
        writeln!(out, "{url}: inbox tables are up to date")?;
    }
    Ok(if pending.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
