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
    /// Schema of the inbox tables (PostgreSQL; SQLite keeps them in `main`). Lowercase letters,
    /// digits and `_`.
    #[arg(long, env = "INBOXED_SCHEMA")]
    schema: Option<String>,
    /// Prefix of the inbox table names. Lowercase letters, digits and `_`.
    #[arg(long, env = "INBOXED_TABLE_PREFIX", default_value = "inboxed_")]
    table_prefix: String,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let url = &args.database_url;
    let is_pg = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let schema = args
        .schema
        .as_deref()
        .unwrap_or(if is_pg { "public" } else { "main" });
    let store = AnyStore::connect_in(url, 2, Some((schema, &args.table_prefix))).await?;
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
