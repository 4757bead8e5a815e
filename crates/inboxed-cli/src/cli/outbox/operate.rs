//! `inboxed outbox list|show|retry|discard`: an operator's look at the outbox's rows, and the
//! retry or discard of dead ones under a filter, a dry run unless given `--yes`, each change
//! audited with who and why in the same transaction.

use std::io::Write;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::bail;
use serde_json::json;

use inboxed_core::outbox::{DeadAction, DeadParams, OutboxEntry, OutboxFilter, OutboxStatus};

use crate::cli::database::DbArgs;
use crate::cli::duration::age;

/// Which rows: each flag narrows.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct FilterArgs {
    /// Only these row ids (repeat for several).
    #[arg(long = "id")]
    ids: Vec<i64>,
    /// Only the row published under this message id.
    #[arg(long)]
    message_id: Option<String>,
    /// Only rows to this destination.
    #[arg(long)]
    destination: Option<String>,
    /// Only rows of this ordering key.
    #[arg(long)]
    key: Option<String>,
}

impl FilterArgs {
    fn filter(&self) -> OutboxFilter {
        let mut f = OutboxFilter::ids(self.ids.clone());
        f.message_id.clone_from(&self.message_id);
        f.destination.clone_from(&self.destination);
        f.ordering_key.clone_from(&self.key);
        f
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    db: DbArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Only rows in this state: pending, sending, sent or dead.
    #[arg(long)]
    status: Option<OutboxStatus>,
    /// At most this many, oldest first.
    #[arg(long, default_value_t = 50)]
    limit: u32,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ShowArgs {
    #[command(flatten)]
    db: DbArgs,
    /// The row id from `list`, or the message id it is published under.
    id: String,
    /// Show at most this many bytes of the payload.
    #[arg(long, default_value_t = 64 * 1024)]
    max_bytes: usize,
    /// As one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct DeadArgs {
    #[command(flatten)]
    db: DbArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Every dead row (required when no other filter is given, so that a bare command never
    /// touches them all by accident).
    #[arg(long)]
    all: bool,
    /// Who is doing this, for the audit record.
    #[arg(long, env = "USER")]
    actor: String,
    /// Why, for the audit record.
    #[arg(long)]
    reason: String,
    /// Do it (otherwise only say which rows it would touch).
    #[arg(long)]
    yes: bool,
}

pub(crate) async fn list(args: ListArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let store = args.db.connect_existing(2).await?;
    let mut filter = args.filter.filter();
    filter.status = args.status;
    let rows = store.list_outbox(&filter, args.limit).await?;
    let now = SystemTime::now();
    if args.json {
        for e in &rows {
            writeln!(out, "{}", summary(e, now))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:>8}  {:<36} {:<20} {:<8} {:>8} {:>8} {:>10}  error",
        "id", "message id", "destination", "status", "attempts", "bytes", "written"
    )?;
    for e in &rows {
        let written = ago(e.created_at, now).map_or_else(|| "-".to_owned(), age);
        let error: String = e
            .last_error
            .as_deref()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect();
        writeln!(
            out,
            "{:>8}  {:<36} {:<20} {:<8} {:>8} {:>8} {:>10}  {}",
            e.id,
            e.message_id,
            e.destination,
            e.status,
            e.attempts,
            e.payload_bytes,
            written,
            error.replace('\n', " ")
        )?;
    }
    writeln!(out, "{} row(s)", rows.len())?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn show(args: ShowArgs, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    let store = args.db.connect_existing(2).await?;
    let found = match args.id.parse::<i64>() {
        Ok(id) => store.load_outbox(Some(id), None).await?,
        Err(_) => store.load_outbox(None, Some(&args.id)).await?,
    };
    let Some(e) = found else {
        bail!(
            "no outbox row {:?} (a row id from `list`, or a message id)",
            args.id
        );
    };
    let (payload, form) = render(&e.payload, args.max_bytes);
    let now = SystemTime::now();
    if args.json {
        let mut line = summary(&e, now);
        line["ordering_key"] = json!(e.ordering_key);
        line["message_type"] = json!(e.message_type);
        line["correlation_id"] = json!(e.correlation_id);
        line["headers"] = json!(e.headers);
        line["caused_by_consumer"] = json!(e.caused_by_consumer);
        line["caused_by_message_id"] = json!(e.caused_by_message_id);
        line["claimed_by"] = json!(e.claimed_by);
        line["payload"] = json!(payload);
        line["payload_form"] = json!(form);
        writeln!(out, "{line}")?;
        return Ok(ExitCode::SUCCESS);
    }
    let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
    let when = |t| ago(t, now).map_or_else(|| "-".to_owned(), |d| format!("{} ago", age(d)));
    writeln!(out, "outbox row {}", e.id)?;
    writeln!(out, "  message id      {}", e.message_id)?;
    writeln!(out, "  destination     {}", e.destination)?;
    writeln!(out, "  ordering key    {}", or_dash(&e.ordering_key))?;
    writeln!(out, "  type            {}", or_dash(&e.message_type))?;
    writeln!(out, "  correlation id  {}", or_dash(&e.correlation_id))?;
    writeln!(
        out,
        "  caused by       {}",
        match (&e.caused_by_consumer, &e.caused_by_message_id) {
            (Some(c), Some(m)) => format!("{m} (consumer {c})"),
            (None, Some(m)) => m.clone(),
            _ => "-".to_owned(),
        }
    )?;
    writeln!(
        out,
        "  status          {} after {} attempt(s)",
        e.status, e.attempts
    )?;
    writeln!(out, "  written         {}", when(e.created_at))?;
    writeln!(out, "  sent            {}", when(e.sent_at))?;
    writeln!(out, "  last error      {}", or_dash(&e.last_error))?;
    for (name, value) in &e.headers {
        writeln!(out, "  header          {name}: {value}")?;
    }
    writeln!(
        out,
        "  payload ({}, {} bytes)  {payload}",
        form, e.payload_bytes
    )?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn dead(
    args: DeadArgs,
    action: DeadAction,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let filter = args.filter.filter();
    if filter == OutboxFilter::all() && !args.all {
        bail!("say which dead rows (--id, --message-id, --destination, --key), or --all");
    }
    let store = args.db.connect_existing(2).await?;
    let params = DeadParams {
        filter: &filter,
        action,
        actor: &args.actor,
        reason: &args.reason,
        apply: args.yes,
    };
    let ids = store.act_on_dead(&params).await?;
    let what = match action {
        DeadAction::Retry => "retried (pending again, attempts 0, same message ids)",
        DeadAction::Discard => "discarded (deleted; never published)",
        _ => "changed",
    };
    let shown = ids
        .iter()
        .take(20)
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let more = if ids.len() > 20 { ", …" } else { "" };
    if args.yes {
        writeln!(out, "{} dead row(s) {what}: [{shown}{more}]", ids.len())?;
    } else {
        writeln!(
            out,
            "would have {} dead row(s) {what}: [{shown}{more}]; --yes to do it",
            ids.len()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn ago(t: Option<SystemTime>, now: SystemTime) -> Option<std::time::Duration> {
    t.and_then(|t| now.duration_since(t).ok())
}

/// The fields a list line and a `show --json` share.
fn summary(e: &OutboxEntry, now: SystemTime) -> serde_json::Value {
    json!({ "id": e.id, "message_id": e.message_id, "destination": e.destination,
        "status": e.status.as_str(), "attempts": e.attempts, "payload_bytes": e.payload_bytes,
        "written_seconds_ago": ago(e.created_at, now).map(|a| a.as_secs()),
        "sent_seconds_ago": ago(e.sent_at, now).map(|a| a.as_secs()),
        "last_error": e.last_error })
}

/// The payload as an operator reads it, and in which form: JSON re-indented when it parses,
/// text when it is UTF-8, hex otherwise; cut at `max` bytes.
fn render(payload: &[u8], max: usize) -> (String, &'static str) {
    let cut = &payload[..payload.len().min(max)];
    let tail = if cut.len() < payload.len() {
        format!(" … ({} more bytes)", payload.len() - cut.len())
    } else {
        String::new()
    };
    if cut.len() == payload.len()
        && let Ok(value) = serde_json::from_slice::<serde_json::Value>(payload)
    {
        return (value.to_string(), "json");
    }
    match std::str::from_utf8(cut) {
        Ok(text) => (format!("{text}{tail}"), "text"),
        Err(_) => {
            let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
            (format!("{hex}{tail}"), "hex")
        }
    }
}
