//! `inboxed dead-letters`: list, show, retry and discard dead letters by id; a retry into the
//! inbox and a discard are audited, through the operation the console runs.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde_json::json;

use inboxed_core::observe::{
    DeadLetterFilter, DeadLetterRecord, LetterActParams, LetterAction, LettersActed, ObserveStore,
};

use super::AnyStore;
use super::database::{DbArgs, on_store};
use super::duration::{age, parse_duration};

mod broker;
mod optional;
mod retry;

use broker::BrokerArgs;
use retry::{Destination, retry};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// List dead letters, newest failure first, without their payloads.
    List {
        #[command(flatten)]
        db: DbArgs,
        /// Only this consumer's.
        #[arg(long)]
        consumer: Option<String>,
        /// Only this reason: permanent, attempts_exhausted, conflict or invalid_message.
        #[arg(long)]
        reason: Option<String>,
        /// Only those that failed within this long (e.g. 2h).
        #[arg(long, value_parser = parse_duration)]
        since: Option<Duration>,
        /// Only those whose error contains this text (case-insensitive).
        #[arg(long)]
        grep: Option<String>,
        /// Only this message type (the producer's type property, as `show` prints it).
        #[arg(long = "type", value_name = "TYPE")]
        message_type: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one dead letter in full: metadata, the whole error chain, the payload.
    Show {
        #[command(flatten)]
        db: DbArgs,
        /// The id from `list`.
        id: i64,
        /// As one JSON object (the payload as text when it is UTF-8, else in hex).
        #[arg(long)]
        json: bool,
    },
    /// Send dead letters back to be processed again, after a fix: into the store-then-process
    /// inbox of their consumer (--into-inbox, deleting each dead letter), or back to the
    /// broker its processor reads (--to-broker, marked as a redrive; the consumer deletes the
    /// dead letter when the retry commits). Says where each goes; a dry run unless given --yes.
    Retry {
        #[command(flatten)]
        db: DbArgs,
        /// The ids from `list`.
        #[arg(required = true)]
        ids: Vec<i64>,
        /// The consumer processes rows with store-then-process workers (its own, or behind
        /// `inboxed relay`): store each message into its inbox.
        #[arg(long)]
        into_inbox: bool,
        #[command(flatten)]
        broker: BrokerArgs,
        #[command(flatten)]
        audit: AuditArgs,
        /// Do it (otherwise only say what would happen).
        #[arg(long)]
        yes: bool,
    },
    /// Delete dead letters for good: they will never be processed. A dry run unless given
    /// --yes.
    Discard {
        #[command(flatten)]
        db: DbArgs,
        /// The ids from `list`.
        #[arg(required = true)]
        ids: Vec<i64>,
        #[command(flatten)]
        audit: AuditArgs,
        /// Do it (otherwise only say what would happen).
        #[arg(long)]
        yes: bool,
    },
}

/// Who retries or discards, and why: the audit record a retry into the inbox or a discard
/// writes in its transaction (`inboxed serve`'s console writes the same).
#[derive(Debug, clap::Args)]
struct AuditArgs {
    /// Who is doing this, for the audit record.
    #[arg(long, env = "USER", default_value = "inboxed-cli")]
    actor: String,
    /// Why, for the audit record.
    #[arg(long, default_value = "")]
    why: String,
}

pub(crate) async fn run(args: Args, out: &mut impl Write) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::List {
            db,
            consumer,
            reason,
            since,
            grep,
            message_type,
            limit,
            json,
        } => {
            let store = db.connect_existing(2).await?;
            let filter = DeadLetterFilter {
                consumer: consumer.as_deref(),
                reason: reason.as_deref(),
                since: since.map(|d| SystemTime::now() - d),
                error_contains: grep.as_deref(),
                message_type: message_type.as_deref(),
                limit,
                ..DeadLetterFilter::default()
            };
            let letters = store.list_dead_letters(&filter).await?;
            let now = SystemTime::now();
            let ago = |t: Option<SystemTime>| t.and_then(|t| now.duration_since(t).ok());
            if json {
                for d in &letters {
                    let line = json!({ "id": d.id, "consumer": d.consumer,
                        "message_id": d.message_id, "message_type": d.message_type,
                        "reason": d.reason, "attempts": d.attempts,
                        "failed_seconds_ago": ago(d.last_failed).map(|a| a.as_secs()),
                        "payload_bytes": d.payload_bytes, "error": d.error });
                    writeln!(out, "{line}")?;
                }
                return Ok(ExitCode::SUCCESS);
            }
            writeln!(
                out,
                "{:>8}  {:<16} {:<28} {:<19} {:>8} {:>10}  error",
                "id", "consumer", "message id", "reason", "attempts", "failed"
            )?;
            for d in &letters {
                let failed = ago(d.last_failed).map_or_else(|| "-".to_owned(), age);
                let error: String = d.error.chars().take(60).collect();
                writeln!(
                    out,
                    "{:>8}  {:<16} {:<28} {:<19} {:>8} {:>10}  {}",
                    d.id,
                    d.consumer,
                    d.message_id.as_deref().unwrap_or("(none)"),
                    d.reason,
                    d.attempts,
                    failed,
                    error.replace('\n', " ")
                )?;
            }
            writeln!(out, "{} dead letter(s)", letters.len())?;
            Ok(ExitCode::SUCCESS)
        }
        Action::Show { db, id, json } => {
            let store = db.connect_existing(2).await?;
            let d = load(&store, id).await?;
            let payload = String::from_utf8(d.payload.clone())
                .unwrap_or_else(|_| format!("(binary, hex) {}", hex(&d.payload)));
            if json {
                let line = json!({ "id": d.id, "consumer": d.consumer,
                    "message_id": d.message_id, "message_type": d.message_type,
                    "correlation_id": d.correlation_id, "reason": d.reason, "error": d.error,
                    "attempts": d.attempts, "payload": payload });
                writeln!(out, "{line}")?;
            } else {
                writeln!(out, "dead letter {}", d.id)?;
                writeln!(out, "  consumer        {}", d.consumer)?;
                writeln!(
                    out,
                    "  message id      {}",
                    d.message_id.as_deref().unwrap_or("(none)")
                )?;
                writeln!(
                    out,
                    "  type            {}",
                    d.message_type.as_deref().unwrap_or("-")
                )?;
                writeln!(
                    out,
                    "  correlation id  {}",
                    d.correlation_id.as_deref().unwrap_or("-")
                )?;
                writeln!(
                    out,
                    "  reason          {} after {} attempt(s)",
                    d.reason, d.attempts
                )?;
                writeln!(out, "  error           {}", d.error)?;
                writeln!(out, "  payload         {payload}")?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Action::Retry {
            db,
            ids,
            into_inbox,
            broker,
            audit,
            yes,
        } => {
            let store = db.connect_existing(2).await?;
            let mut to = Destination::new(into_inbox, &broker)?;
            let mut refused = false;
            if matches!(to, Destination::Inbox) {
                refused = !retry::into_inbox(&store, &ids, &audit, yes, out).await?;
            } else {
                for id in ids {
                    let d = load(&store, id).await?;
                    refused |= !retry(&d, &mut to, yes, out).await?;
                }
            }
            Ok(if refused {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Action::Discard {
            db,
            ids,
            audit,
            yes,
        } => {
            let store = db.connect_existing(2).await?;
            let (done, letters) = act_on(&store, &ids, LetterAction::Discard, &audit, yes).await?;
            for id in &done.acted {
                let (_, consumer) = &letters[id];
                if yes {
                    writeln!(out, "dead letter {id} of `{consumer}` discarded")?;
                } else {
                    writeln!(
                        out,
                        "would discard dead letter {id} of `{consumer}` (--yes to do it)"
                    )?;
                }
            }
            if yes {
                writeln!(
                    out,
                    "{} dead letter(s) discarded, audited as `{}`",
                    done.acted.len(),
                    audit.actor
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Each letter of `ids` as `(message id, consumer)`, for the lines printed: read first, since
/// an applied action deletes them.
type Named = BTreeMap<i64, (String, String)>;

/// `action` on the letters `ids` through the library's audited operation (the console's), or
/// its dry run; what it did, and each letter named.
async fn act_on(
    store: &AnyStore,
    ids: &[i64],
    action: LetterAction,
    audit: &AuditArgs,
    yes: bool,
) -> anyhow::Result<(LettersActed, Named)> {
    let mut letters = Named::new();
    for &id in ids {
        let d = load(store, id).await?;
        letters.insert(id, (d.message_id.unwrap_or_default(), d.consumer));
    }
    let filter = DeadLetterFilter {
        limit: u32::try_from(ids.len()).unwrap_or(u32::MAX),
        ..DeadLetterFilter::default()
    };
    let params = LetterActParams {
        filter: &filter,
        ids: Some(ids),
        action,
        actor: &audit.actor,
        reason: &audit.why,
        apply: yes,
    };
    let done = on_store!(store, s => s.act_on_dead_letters(&params).await?);
    Ok((done, letters))
}

async fn load(store: &AnyStore, id: i64) -> anyhow::Result<DeadLetterRecord> {
    store
        .dead_letter_by_id(id)
        .await?
        .with_context(|| format!("no dead letter with id {id}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
