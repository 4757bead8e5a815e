//! `inboxed dead-letters retry`: one dead letter sent where its consumer processes it again,
//! into its store-then-process inbox or back to the broker its processor reads.

use std::io::Write;

use inboxed_core::observe::{DeadLetterRecord, LetterAction};
use inboxed_core::{ConsumerName, KeySource, MessageId};

use super::super::AnyStore;
use super::super::database::redact;
use super::broker::{BrokerArgs, Publisher, check, key_rule};

/// Where `retry` sends dead letters.
pub(super) enum Destination<'a> {
    /// No destination was named: say which to name.
    Unnamed,
    /// The store-then-process inbox of the letter's consumer (see [`into_inbox`]).
    Inbox,
    /// Back to a broker; connected at the first publish.
    Broker {
        args: &'a BrokerArgs,
        url: &'a str,
        key: KeySource,
        publisher: Option<Box<Publisher>>,
        /// The consumer of the first letter: one destination is one consumer's queue.
        consumer: Option<String>,
    },
}

impl<'a> Destination<'a> {
    pub(super) fn new(into_inbox: bool, broker: &'a BrokerArgs) -> anyhow::Result<Self> {
        Ok(match (&broker.url, into_inbox) {
            (Some(url), _) => {
                check(broker, url)?;
                Self::Broker {
                    args: broker,
                    url,
                    key: key_rule(broker)?,
                    publisher: None,
                    consumer: None,
                }
            }
            (None, true) => Self::Inbox,
            (None, false) => Self::Unnamed,
        })
    }
}

/// Retries dead letter `d`; false when it cannot be retried where `to` says.
pub(super) async fn retry(
    d: &DeadLetterRecord,
    to: &mut Destination<'_>,
    yes: bool,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let id = d.id;
    let Some(message_id) = d.message_id.clone() else {
        writeln!(
            out,
            "dead letter {id}: no message id, so it cannot be processed with dedup; fix and republish it, or discard it"
        )?;
        return Ok(false);
    };
    if d.reason == "conflict" {
        writeln!(
            out,
            "dead letter {id}: a conflict (the key was processed with another payload); retrying would only conflict again"
        )?;
        return Ok(false);
    }
    if d.payload.is_empty() {
        writeln!(
            out,
            "dead letter {id}: its payload was redacted; nothing to retry"
        )?;
        return Ok(false);
    }
    let consumer = ConsumerName::new(d.consumer.clone())?;
    let key = MessageId::new(message_id.clone())?;
    match to {
        Destination::Unnamed => {
            writeln!(
                out,
                "dead letter {id} ({message_id}): say where `{consumer}` processes it: --into-inbox when it runs store-then-process workers (its own, or behind `inboxed relay`), --to-broker when its processor reads a broker"
            )?;
            Ok(false)
        }
        Destination::Broker {
            args,
            url,
            key: rule,
            publisher,
            consumer: first,
        } => {
            let args: &BrokerArgs = args;
            let first = first.get_or_insert_with(|| d.consumer.clone());
            if *first != d.consumer {
                writeln!(
                    out,
                    "dead letter {id} ({message_id}): of `{consumer}`, but this run publishes to the queue of `{first}`; retry each consumer's letters in a run of their own"
                )?;
                return Ok(false);
            }
            let Some(place) = rule.place_of(&key, &d.payload) else {
                writeln!(
                    out,
                    "dead letter {id} ({message_id}): `{consumer}` reads its key from the body (--key {}), and this payload does not hold it; republish it from the producer",
                    args.key
                )?;
                return Ok(false);
            };
            if !yes {
                writeln!(
                    out,
                    "would publish dead letter {id} ({message_id}) to {}, marked as a redrive for `{consumer}` (--yes to do it)",
                    redact(url)
                )?;
                return Ok(true);
            }
            let publisher = match publisher {
                Some(p) => p,
                None => publisher.insert(Box::new(Publisher::connect(args, url).await?)),
            };
            match publisher.publish(d, &key, place).await {
                Ok(place) => {
                    writeln!(
                        out,
                        "dead letter {id} ({message_id}) -> {place}, marked as a redrive; the dead letter stays until `{consumer}` processes it"
                    )?;
                    Ok(true)
                }
                Err(e) => {
                    writeln!(out, "dead letter {id} ({message_id}): not published: {e:#}")?;
                    Ok(false)
                }
            }
        }
        // Stored by `into_inbox`, all at once, with their audit record.
        Destination::Inbox => Ok(true),
    }
}

/// Stores the letters `ids` into their consumers' inboxes and deletes them, with one audit
/// record, in one transaction: the library's operation that the console's retry runs too.
/// False when some could not be retried.
pub(super) async fn into_inbox(
    store: &AnyStore,
    ids: &[i64],
    audit: &super::AuditArgs,
    yes: bool,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let (done, letters) = super::act_on(store, ids, LetterAction::Retry, audit, yes).await?;
    for (id, row) in &done.rows {
        let (message_id, consumer) = &letters[id];
        match row {
            None => writeln!(
                out,
                "would store dead letter {id} ({message_id}) into the inbox of `{consumer}` for its workers (--yes to do it)"
            )?,
            Some(row) => writeln!(
                out,
                "dead letter {id} ({message_id}) -> inbox row {row} of `{consumer}`, pending for its workers"
            )?,
        }
    }
    for (id, why) in &done.kept {
        writeln!(out, "dead letter {id}: {why}; kept")?;
    }
    if yes && !done.acted.is_empty() {
        writeln!(
            out,
            "{} dead letter(s) retried, audited as `{}`",
            done.acted.len(),
            audit.actor
        )?;
    }
    Ok(done.kept.is_empty())
}
