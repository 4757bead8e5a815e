//! How a relay marks a batch, whatever its claim mode: each row's verdict from what the broker
//! confirmed of it, the cut to a crashed batch's limit, and the counting and logging of what
//! became of the rows.

use tracing::{debug, warn};

use super::publish::Confirmation;
use super::relay::OutboxRelayReport;
use super::store::OutboxRow;
use crate::metrics as m;

/// How a row is marked, from what the broker confirmed of it.
pub(super) enum Verdict {
    Confirmed,
    Failed { reason: String, permanent: bool },
    NotSent(String),
}

/// Each row's verdict, in the rows' order; a row the publisher gave no outcome for is
/// unconfirmed.
pub(super) fn verdicts(rows: &[OutboxRow], confirmations: Vec<Confirmation>) -> Vec<Verdict> {
    let mut confirmations = confirmations.into_iter();
    rows.iter()
        .map(|_| match confirmations.next() {
            Some(Confirmation::Confirmed) => Verdict::Confirmed,
            Some(Confirmation::Refused { reason, permanent }) => Verdict::Failed {
                reason: format!("refused by the broker: {reason}"),
                permanent,
            },
            Some(Confirmation::Unconfirmed { reason }) => Verdict::Failed {
                reason: format!("not confirmed by the broker: {reason}"),
                permanent: false,
            },
            Some(Confirmation::NotSent { reason }) => Verdict::NotSent(reason),
            None => Verdict::Failed {
                reason: "not confirmed by the broker: the publisher gave no outcome for this row"
                    .to_owned(),
                permanent: false,
            },
        })
        .collect()
}

/// Cuts `rows` (in insert order) to the smallest `group_limit` among them: a row of a batch
/// whose relay died goes with at most that many rows, so that halving corners a row that kills
/// its relay. The ids cut, which the caller leaves for a later batch.
pub(super) fn within_group_limit(rows: &mut Vec<OutboxRow>) -> Vec<i64> {
    let Some(limit) = rows.iter().filter_map(|r| r.group_limit).min() else {
        return Vec::new();
    };
    let keep = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
    if rows.len() <= keep {
        return Vec::new();
    }
    rows.split_off(keep).into_iter().map(|r| r.id).collect()
}

/// Counts and logs a row whose publish failed: dead, or to be retried.
pub(super) fn failed_row(
    row: &OutboxRow,
    reason: &str,
    dead: bool,
    report: &mut OutboxRelayReport,
) {
    if dead {
        report.dead += 1;
        warn!(
            row = row.id,
            message_id = row.message_id,
            destination = row.destination,
            error = reason,
            "outbox row is dead"
        );
    } else {
        report.retrying += 1;
        debug!(
            row = row.id,
            message_id = row.message_id,
            error = reason,
            attempts = row.attempts,
            "outbox row will be retried"
        );
    }
}

/// Counts and logs rows a reaper returned after their relay died.
pub(super) fn judged(rows: u64) {
    metrics::counter!(m::OUTBOX_LEASES_EXPIRED_TOTAL).increment(rows);
    warn!(
        rows,
        "outbox rows whose relay stopped before marking them are pending again"
    );
}

pub(super) fn handed_back(rows: usize, reason: &str) {
    warn!(rows, error = reason, "broker unreachable; rows handed back");
}

pub(super) fn count(report: &OutboxRelayReport) {
    let fates = [
        ("sent", report.sent),
        ("retrying", report.retrying),
        ("dead", report.dead),
        ("handed_back", report.handed_back),
        ("lost", report.lost),
    ];
    for (fate, n) in fates {
        if n > 0 {
            metrics::counter!(m::OUTBOX_ROWS_TOTAL, "fate" => fate).increment(n);
        }
    }
}
