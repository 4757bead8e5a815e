//! `inboxed dead-letters retry`: one dead letter sent where its consumer processes it again,
//! into its store-then-process inbox or back to the broker its processor reads.

use std::io::Write;

use anyhow::bail;

use inboxed_core::inbox::{Enqueued, Inbox};
use inboxed_core::observe::DeadLetterRecord;
use inboxed_core::{ConsumerName, Envelope, KeySource, MessageId};

use super::super::AnyStore;
use super::super::database::redact;
use super::broker::{BrokerArgs, Publisher, check, key_rule};

/// Where `retry` sends dead letters.
pub(super) enum Destination<'a> {
    /// No destination was named: say which to name.
    Unnamed,
    /// The store-then-process inbox of the letter's consumer.
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
    store: &AnyStore,
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
        Destination::Inbox => into_inbox(store, d, consumer, key, yes, out).await,
    }
}

/// Stores the letter into its consumer's inbox and deletes it.
async fn into_inbox(
    store: &AnyStore,
    d: &DeadLetterRecord,
    consumer: ConsumerName,
    key: MessageId,
    yes: bool,
    out: &mut impl Write,
) -> anyhow::Result<bool> {
    let (id, message_id) = (d.id, key.as_str().to_owned());
    if !yes {
        writeln!(
            out,
            "would store dead letter {id} ({message_id}) into the inbox of `{consumer}` for its workers (--yes to do it)"
        )?;
        return Ok(true);
    }
    let mut envelope = Envelope::new(key, d.payload.clone());
    if let Some(t) = &d.message_type {
        envelope = envelope.with_type(t.clone());
    }
    if let Some(c) = &d.correlation_id {
        envelope = envelope.with_correlation_id(c.clone());
    }
    let stored = match store {
        AnyStore::Postgres(s) => {
            Inbox::new(s.clone(), consumer.clone())
                .store(&envelope)
                .await?
        }
        AnyStore::Sqlite(s) => {
            Inbox::new(s.clone(), consumer.clone())
                .store(&envelope)
                .await?
        }
        AnyStore::MySql(s) => {
            Inbox::new(s.clone(), consumer.clone())
                .store(&envelope)
                .await?
        }
    };
    match stored {
        Enqueued::Stored { id: row } => {
            store.delete_dead_letter_by_id(id).await?;
            writeln!(
                out,
                "dead letter {id} ({message_id}) -> inbox row {row} of `{consumer}`, pending for its workers"
            )?;
            Ok(true)
        }
        Enqueued::Duplicate => {
            // The same message is already a row (an earlier retry stored it and stopped before
            // deleting the letter): finish that retry.
            store.delete_dead_letter_by_id(id).await?;
            writeln!(
                out,
                "dead letter {id} ({message_id}): already in the inbox of `{consumer}` with this payload; dead letter removed"
            )?;
            Ok(true)
        }
        Enqueued::Conflict { .. } => {
            writeln!(
                out,
                "dead letter {id} ({message_id}): the inbox holds this key with another payload; kept"
            )?;
            Ok(false)
        }
        _ => bail!("unexpected receipt outcome"),
    }
}
