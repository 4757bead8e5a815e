//! `inboxed replay`: dead store-then-process rows back to pending (and, with
//! `--include-done`, done rows too: a re-drive that applies their effect again), with an audit
//! record of who, when, why and which rows.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use inboxed_core::ConsumerName;
use inboxed_core::inbox::{Inbox, Selector};

use super::database::{DbArgs, on_store};
use super::duration::parse_duration;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    db: DbArgs,
    /// Whose rows.
    #[arg(long)]
    consumer: String,
    /// Only these row ids (repeat for several).
    #[arg(long = "id")]
    ids: Vec<i64>,
    /// Only this aggregate's rows.
    #[arg(long)]
    aggregate: Option<String>,
    /// Only rows received within this long (e.g. 2h).
    #[arg(long, value_parser = parse_duration)]
    received_within: Option<Duration>,
    /// Done rows too: their effect is applied a second time (a re-drive, for a handler fixed
    /// after it processed them wrongly).
    #[arg(long)]
    include_done: bool,
    /// Who is doing this, for the audit record.
    #[arg(long, env = "USER")]
    actor: String,
    /// Why, for the audit record.
    #[arg(long)]
    reason: String,
    /// Do it (otherwise only say what would happen).
    #[arg(long)]
    yes: bool,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let consumer = ConsumerName::new(args.consumer.clone())?;
    let mut selector = if args.ids.is_empty() {
        Selector::all()
    } else {
        Selector::ids(args.ids.clone())
    };
    selector.aggregate_id = args.aggregate.clone();
    if let Some(within) = args.received_within {
        selector.received_from = Some(SystemTime::now() - within);
    }
    let store = args.db.connect_existing(2).await?;
    let what = if args.include_done {
        "dead and done rows (done rows apply their effect again)"
    } else {
        "dead rows"
    };
    if !args.yes {
        let found = on_store!(&store, s => {
            Inbox::new(s.clone(), consumer.clone())
                .replay_preview(&selector, args.include_done)
                .await?
        });
        writeln!(
            out,
            "would reset {} {what} of `{consumer}` matching {selector} to pending{}: {:?}; --yes to do it",
            found.ids.len(),
            if found.done_rows > 0 {
                format!(", {} of them done, which would run again", found.done_rows)
            } else {
                String::new()
            },
            found.ids
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let replayed = on_store!(&store, s => {
        Inbox::new(s.clone(), consumer.clone())
            .replay(&selector, args.include_done, &args.actor, &args.reason)
            .await?
    });
    writeln!(
        out,
        "reset {} row(s) of `{consumer}` to pending ({} of them done), audited as `{}`: {:?}",
        replayed.ids.len(),
        replayed.done_rows,
        args.actor,
        replayed.ids
    )?;
    Ok(ExitCode::SUCCESS)
}
