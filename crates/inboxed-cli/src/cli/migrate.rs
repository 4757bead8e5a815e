//! `inboxed migrate`.

use std::io::Write;
use std::process::ExitCode;

use super::database::DbArgs;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArgs,
    /// Only report which migrations are applied and which are pending; change nothing. Exits
    /// 1 when some are pending.
    #[arg(long)]
    status: bool,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    if args.status {
        let store = args.db.connect_existing(2).await?;
        let pending = store.pending_migrations().await?;
        let url = args.db.shown_url();
        return Ok(if pending.is_empty() {
            writeln!(out, "{url}: inbox tables are up to date")?;
            ExitCode::SUCCESS
        } else {
            writeln!(
                out,
                "{url}: pending migrations {pending:?} (run inboxed migrate)"
            )?;
            ExitCode::from(1)
        });
    }
    let store = args.db.connect(2).await?;
    let applied = store.migrate().await?;
    let url = args.db.shown_url();
    if applied.is_empty() {
        writeln!(out, "{url}: inbox tables are up to date")?;
    } else {
        writeln!(out, "{url}: applied migrations {applied:?}")?;
    }
    Ok(ExitCode::SUCCESS)
}
