//! The [`ObserveStore`](crate::observe::ObserveStore) reads behind `inboxed serve`, for every
//! engine: the statements return the same columns everywhere (times as milliseconds).

use super::{Args, Columns, Engine};
use crate::envelope::ConsumerName;
use crate::error::StoreError;
use crate::inbox::store::millis;
use crate::kill_switch::Opened;
use crate::observe::{
    DeadLetterFilter, DeadLetterRecord, DeadLetterSummary, Observation, OpenSwitches,
    OutboxBacklog, rows,
};

/// The backlog of every consumer and the dead letters by consumer and reason.
///
/// # Errors
/// A statement failed.
pub async fn observe<E: Engine>(e: &E) -> Result<Observation, StoreError> {
    let qs = e.queries();
    let backlog = e.fetch_alone(e.query(&qs.observe_inbox)).await?;
    let letters = e.fetch_alone(e.query(&qs.observe_dead_letters)).await?;
    // An engine whose outbox is not built yet has no outbox table to read.
    let outbox = if qs.observe_outbox.is_empty() {
        Vec::new()
    } else {
        e.fetch_alone(e.query(&qs.observe_outbox)).await?
    };
    let outbox = outbox
        .iter()
        .map(|r| {
            Ok(OutboxBacklog::from_columns(
                r.text(0)?,
                [r.int(1)?, r.int(2)?, r.int(3)?, r.int(5)?, r.int(6)?],
                r.opt_int(4)?,
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    let switches = e.fetch_alone(e.query(&qs.observe_switches)).await?;
    let switches = switches
        .iter()
        .map(|r| {
            Ok(OpenSwitches::from_columns(
                r.text(0)?,
                r.int(1)?,
                [r.opt_int(2)?, r.opt_int(3)?, r.opt_int(4)?],
            ))
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(Observation::new(
        backlog
            .iter()
            .map(rows::backlog)
            .collect::<Result<_, _>>()?,
        letters
            .iter()
            .map(rows::letter_count)
            .collect::<Result<_, _>>()?,
    )
    .with_outbox(outbox)
    .with_switches(switches))
}

/// Writes that `consumer`'s switch `switch` is open (`Some`), or deletes its row (`None`).
///
/// # Errors
/// The statement failed.
pub async fn report_switch<E: Engine>(
    e: &E,
    consumer: &ConsumerName,
    switch: &str,
    opened: Option<Opened>,
) -> Result<(), StoreError> {
    let qs = e.queries();
    let q = match opened {
        Some(opened) => e
            .query(&qs.switch_open)
            .text(consumer.as_str())
            .text(switch)
            .int(millis(opened.at))
            .int(millis(opened.next_probe)),
        None => e
            .query(&qs.switch_close)
            .text(consumer.as_str())
            .text(switch),
    };
    e.execute_alone(q).await.map(drop)
}

/// The dead letters `filter` selects, newest first.
///
/// # Errors
/// The statement failed.
pub async fn list_dead_letters<E: Engine>(
    e: &E,
    filter: &DeadLetterFilter<'_>,
) -> Result<Vec<DeadLetterSummary>, StoreError> {
    let q = e
        .query(&e.queries().list_dead_letters)
        .opt_text(filter.consumer)
        .opt_text(filter.reason)
        .opt_int(filter.since.map(millis))
        .opt_text(filter.error_contains)
        .int(i64::from(filter.limit.max(1)))
        .opt_text(filter.message_type)
        .opt_text(filter.message_id)
        .int(
            filter
                .window
                .map_or(i64::MAX, |w| i64::try_from(w.max(1)).unwrap_or(i64::MAX)),
        )
        .opt_bytes(filter.payload_contains)
        .opt_text(
            filter
                .payload_json
                .map(|(keys, _)| super::operate::json_keys(keys))
                .as_deref(),
        )
        .opt_text(filter.payload_json.map(|(_, value)| value));
    e.fetch_alone(q).await?.iter().map(rows::summary).collect()
}

/// One dead letter by its row id.
///
/// # Errors
/// The statement failed.
pub async fn dead_letter_by_id<E: Engine>(
    e: &E,
    id: i64,
) -> Result<Option<DeadLetterRecord>, StoreError> {
    let q = e.query(&e.queries().load_dead_letter_by_id).int(id);
    e.fetch_alone(q)
        .await?
        .first()
        .map(rows::record)
        .transpose()
}

/// Deletes one dead letter by its row id; whether there was one.
///
/// # Errors
/// The statement failed.
pub async fn delete_dead_letter_by_id<E: Engine>(e: &E, id: i64) -> Result<bool, StoreError> {
    let q = e.query(&e.queries().delete_dead_letter_by_id).int(id);
    Ok(!e.fetch_alone(q).await?.is_empty())
}
