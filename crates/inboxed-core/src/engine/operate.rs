//! An operator's work on the inbox tables, for every engine: dead letters retried into the
//! inbox or discarded (audited, in one transaction), and the reads behind the console's row
//! and audit views.

use std::collections::BTreeSet;

use super::{Args, Columns, Engine, claims::enqueue_in};
use crate::driver::Transaction as _;
use crate::envelope::{ConsumerName, Envelope, MessageId};
use crate::error::StoreError;
use crate::inbox::Enqueued;
use crate::inbox::store::millis;
use crate::observe::{
    AuditRecord, DeadLetterFilter, InboxEntry, Kept, LetterActParams, LetterAction, LettersActed,
    MOST_LETTERS_ACTED, RowFilter, from_millis,
};

/// Retries or discards the dead letters a filter (and ids) select, with the audit record, in
/// one transaction; or, for a dry run, says what would happen to each
/// (`letters_select.sql`, `load_dead_letter_by_id.sql` and `enqueue.sql` per retried letter,
/// `letters_delete.sql`, `letters_audit.sql`).
///
/// # Errors
/// A statement or the commit failed; nothing changed.
pub async fn act_on_dead_letters<E: Engine>(
    e: &E,
    p: &LetterActParams<'_>,
) -> Result<LettersActed, StoreError> {
    let qs = e.queries();
    let f = p.filter;
    let mut tx = e.begin_write().await?;
    let q = e
        .query(&qs.letters_select)
        .opt_ids(p.ids)
        .opt_text(f.consumer)
        .opt_text(f.reason)
        .opt_int(f.since.map(millis))
        .opt_text(f.error_contains)
        .opt_text(f.message_type)
        .int(i64::from(f.limit.clamp(1, MOST_LETTERS_ACTED)))
        .opt_text(f.message_id)
        .opt_bytes(f.payload_contains)
        .opt_text(f.payload_json.map(|(keys, _)| json_keys(keys)).as_deref())
        .opt_text(f.payload_json.map(|(_, value)| value));
    let mut out = LettersActed::default();
    let mut retries = Vec::new();
    let mut consumers = BTreeSet::new();
    for r in E::fetch_all(q, &mut tx).await? {
        let id = r.int(0)?;
        out.selected.push(id);
        let consumer = r.text(1)?;
        if p.action == LetterAction::Discard {
            out.acted.push(id);
            consumers.insert(consumer);
            continue;
        }
        match retryable(&consumer, r.opt_text(2)?, &r.text(3)?, r.int(4)?) {
            Ok((name, key)) => retries.push((id, name, key)),
            Err(why) => out.kept.push((id, why)),
        }
    }
    for (id, consumer, key) in retries {
        if !p.apply {
            out.acted.push(id);
            out.rows.push((id, None));
            continue;
        }
        let q = e.query(&qs.load_dead_letter_by_id).int(id);
        let Some(letter) = E::fetch_all(q, &mut tx)
            .await?
            .first()
            .map(crate::observe::rows::record)
        else {
            continue;
        };
        let letter = letter?;
        let mut envelope = Envelope::new(key, letter.payload);
        if let Some(t) = letter.message_type {
            envelope = envelope.with_type(t);
        }
        if let Some(c) = letter.correlation_id {
            envelope = envelope.with_correlation_id(c);
        }
        let row = match enqueue_in(e, &mut tx, &consumer, std::slice::from_ref(&envelope))
            .await?
            .first()
        {
            Some(Enqueued::Stored { id: row }) => *row,
            // The inbox has the message already (perhaps done, perhaps dead): deleting the
            // letter would hide it; replaying that row is the operator's call.
            Some(Enqueued::Duplicate) => {
                out.kept.push((id, Kept::AlreadyInInbox));
                continue;
            }
            _ => {
                out.kept.push((id, Kept::InboxHoldsAnother));
                continue;
            }
        };
        out.acted.push(id);
        out.rows.push((id, Some(row)));
        consumers.insert(consumer.as_str().to_owned());
    }
    if !p.apply || out.acted.is_empty() {
        // Dropped: rolled back, nothing changed.
        return Ok(out);
    }
    E::execute(e.query(&qs.letters_delete).ids(&out.acted), &mut tx).await?;
    let consumer = match (f.consumer, consumers.len()) {
        (Some(c), _) => c.to_owned(),
        (None, 1) => consumers.pop_first().unwrap_or_default(),
        (None, _) => String::new(),
    };
    let q = e
        .query(&qs.letters_audit)
        .text(p.actor)
        .text(p.reason)
        .text(&consumer)
        .text(&describe(f, p.ids))
        .int(i64::try_from(out.acted.len()).unwrap_or(i64::MAX))
        .ids(&out.acted)
        .text(p.action.audit_name());
    E::execute(q, &mut tx).await?;
    tx.commit().await?;
    Ok(out)
}

/// The consumer and key a letter is retried under, or why it cannot be.
fn retryable(
    consumer: &str,
    message_id: Option<String>,
    reason: &str,
    payload_bytes: i64,
) -> Result<(ConsumerName, MessageId), Kept> {
    let message_id = message_id.ok_or(Kept::NoMessageId)?;
    if reason == "conflict" {
        return Err(Kept::Conflict);
    }
    if payload_bytes == 0 {
        return Err(Kept::Redacted);
    }
    let consumer = ConsumerName::new(consumer.to_owned())
        .map_err(|e| Kept::Unusable(format!("its consumer name is not usable: {e}")))?;
    let key = MessageId::new(message_id)
        .map_err(|e| Kept::Unusable(format!("its message id is not usable: {e}")))?;
    Ok((consumer, key))
}

/// The selection as the audit record keeps it: each filter given, by name.
fn describe(f: &DeadLetterFilter<'_>, ids: Option<&[i64]>) -> String {
    let mut parts = Vec::new();
    if let Some(ids) = ids {
        parts.push(format!("ids={ids:?}"));
    }
    for (name, v) in [
        ("consumer", f.consumer),
        ("message_id", f.message_id),
        ("reason", f.reason),
        ("type", f.message_type),
        ("error", f.error_contains),
    ] {
        if let Some(v) = v {
            parts.push(format!("{name}={v:?}"));
        }
    }
    if let Some(bytes) = f.payload_contains {
        parts.push(format!("payload={:?}", String::from_utf8_lossy(bytes)));
    }
    if let Some((path, value)) = f.payload_json {
        parts.push(format!("json={:?}", format!("{path}={value}")));
    }
    if let Some(since) = f.since {
        parts.push(format!("since_ms={}", millis(since)));
    }
    if parts.is_empty() {
        "all".to_owned()
    } else {
        parts.join(" ")
    }
}

/// The rows a filter selects, newest first, without payloads (`rows_list.sql`, or
/// `rows_by_key.sql` for a consumer's message id: a unique key, found wherever it is).
///
/// # Errors
/// The statement failed, or a row does not read.
pub async fn list_rows<E: Engine>(e: &E, f: &RowFilter<'_>) -> Result<Vec<InboxEntry>, StoreError> {
    let keyed = f.is_keyed();
    let qs = e.queries();
    let q = e
        .query(if keyed {
            &qs.rows_by_key
        } else {
            &qs.rows_list
        })
        .opt_text(f.consumer)
        .opt_text(f.status)
        .opt_text(f.aggregate_id)
        .opt_text(f.message_id)
        .opt_int(f.received_from.map(millis))
        .opt_int(f.received_before.map(millis))
        .opt_bytes(f.payload_contains)
        .int(i64::from(f.limit.max(1)));
    let q = if keyed {
        q
    } else {
        q.int(i64::try_from(f.window.max(1)).unwrap_or(i64::MAX))
    };
    let path = f.payload_json.map(|(keys, _)| json_keys(keys));
    let q = q
        .opt_text(path.as_deref())
        .opt_text(f.payload_json.map(|(_, value)| value));
    e.fetch_alone(q)
        .await?
        .iter()
        .map(|r| entry(r, false))
        .collect()
}

/// A payload search's path (`order.id`) as a JSON array of its keys (`["order","id"]`): each
/// engine builds its own path syntax from it in SQL, so that no key is ever spliced into a
/// path string here.
pub(crate) fn json_keys(path: &str) -> String {
    serde_json::Value::from(path.split('.').collect::<Vec<_>>()).to_string()
}

/// One row in full, payload included (`row_load.sql`).
///
/// # Errors
/// The statement failed, or the row does not read.
pub async fn load_row<E: Engine>(e: &E, id: i64) -> Result<Option<InboxEntry>, StoreError> {
    let q = e.query(&e.queries().row_load).int(id);
    e.fetch_alone(q)
        .await?
        .first()
        .map(|r| entry(r, true))
        .transpose()
}

/// The newest audit records, of one consumer or all (`audit_list.sql`).
///
/// # Errors
/// The statement failed, or a record does not read.
pub async fn list_audit<E: Engine>(
    e: &E,
    consumer: Option<&str>,
    limit: u32,
) -> Result<Vec<AuditRecord>, StoreError> {
    let q = e
        .query(&e.queries().audit_list)
        .opt_text(consumer)
        .int(i64::from(limit.max(1)));
    e.fetch_alone(q)
        .await?
        .iter()
        .map(|r| {
            Ok(AuditRecord {
                id: r.int(0)?,
                at: from_millis(r.opt_int(1)?),
                actor: r.text(2)?,
                reason: r.text(3)?,
                action: r.text(4)?,
                consumer: r.text(5)?,
                selector: r.text(6)?,
                rows: r.int(7)?,
                done_rows: r.int(8)?,
                ids: r.text(9)?,
            })
        })
        .collect()
}

fn entry<R: Columns>(r: &R, full: bool) -> Result<InboxEntry, StoreError> {
    Ok(InboxEntry {
        id: r.int(0)?,
        consumer: r.text(1)?,
        message_id: r.text(2)?,
        aggregate_id: r.opt_text(3)?,
        message_type: r.opt_text(4)?,
        status: r.text(5)?,
        attempts: r.int(6)?,
        received: from_millis(r.opt_int(7)?),
        available: from_millis(r.opt_int(8)?),
        lease_expires: from_millis(r.opt_int(9)?),
        claimed_by: r.opt_text(10)?,
        last_error: r.opt_text(11)?,
        done: from_millis(r.opt_int(12)?),
        payload_bytes: u64::try_from(r.int(13)?).unwrap_or(0),
        correlation_id: if full { r.opt_text(14)? } else { None },
        payload: if full { r.bytes(15)? } else { Vec::new() },
    })
}
