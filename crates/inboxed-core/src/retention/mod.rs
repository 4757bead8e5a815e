//! Retention of the processed-messages table: how long a key is remembered, and the purger
//! that forgets older ones in small batches.
//!
//! Retention is a correctness setting, not housekeeping. A key purged while its message can
//! still be redelivered is processed a second time, silently. So a window has no default: you
//! declare the **redelivery horizon** (the longest a message can come back after its first
//! delivery: the broker's maximum redelivery delay, how far back dead letters get replayed,
//! how far a consumer group's offsets can be reset), and a window shorter than the horizon plus
//! a margin ([`DEFAULT_MARGIN`], one day) is refused unless you override it knowingly.

mod purger;
pub mod store;

use std::time::Duration;

use crate::envelope::ConsumerName;

pub use purger::{PassReport, Purger, PurgerConfig};
pub use store::{PartitionReport, RetentionStore};

/// Time partitions of the dedup table (`PgStore::partitioned`, `MySqlStore::partitioned`): keys
/// live in partitions by received time (PostgreSQL) or by the time in their UUIDv7 ids (MySQL,
/// whose unique keys must hold the partition column), and expiry drops whole partitions
/// instead of deleting rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionConfig {
    /// Length of one partition, aligned on multiples of it since the Unix epoch. Defaults to
    /// one day. Every live partition is probed by each claim, so keep their number (window
    /// divided by this) in the tens.
    pub interval: Duration,
    /// Partitions created ahead of the current one, at migration and by every purge pass
    /// (0 is taken as 1, so a boundary never finds its partition missing). Defaults to 7: a
    /// week of claims even if the purger stops.
    pub ahead: u32,
}

impl Default for PartitionConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(24 * 3600),
            ahead: 7,
        }
    }
}

impl PartitionConfig {
    /// Sets [`PartitionConfig::interval`].
    #[must_use]
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Sets [`PartitionConfig::ahead`].
    #[must_use]
    pub fn ahead(mut self, ahead: u32) -> Self {
        self.ahead = ahead;
        self
    }
}

/// Added to the redelivery horizon unless set otherwise: one day, so that a horizon declared
/// from the broker's settings survives a late replay, a long outage or a clock off by hours.
pub const DEFAULT_MARGIN: Duration = Duration::from_secs(24 * 3600);

/// How long one consumer's processed keys are kept. Plain fields; build it with
/// [`Retention::new`] and check it with [`Retention::check`] (the purger does on `consumer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Keys received longer ago than this are purged. No default.
    pub window: Duration,
    /// The longest time after its first delivery that a message can still arrive again. No
    /// default: only you know your broker's redelivery limits and your replay practice.
    pub redelivery_horizon: Duration,
    /// Slack on top of the horizon. Defaults to [`DEFAULT_MARGIN`] (one day).
    pub margin: Duration,
    /// Accept a window shorter than horizon plus margin. Defaults to `false`; set it only when
    /// reprocessing a late redelivery is acceptable.
    pub allow_short_window: bool,
}

impl Retention {
    /// Keep keys for `window`; messages can come back up to `redelivery_horizon` late.
    #[must_use]
    pub fn new(window: Duration, redelivery_horizon: Duration) -> Self {
        Self {
            window,
            redelivery_horizon,
            margin: DEFAULT_MARGIN,
            allow_short_window: false,
        }
    }

    /// Sets [`Retention::margin`].
    #[must_use]
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// Sets [`Retention::allow_short_window`].
    #[must_use]
    pub fn allow_short_window(mut self, allow: bool) -> Self {
        self.allow_short_window = allow;
        self
    }

    /// The shortest window this horizon and margin allow.
    #[must_use]
    pub fn minimum_window(&self) -> Duration {
        self.redelivery_horizon.saturating_add(self.margin)
    }

    /// Refuses a window shorter than horizon plus margin (unless overridden) and a zero window.
    ///
    /// # Errors
    /// [`RetentionError`] naming the consumer and the figures.
    pub fn check(&self, consumer: &ConsumerName) -> Result<(), RetentionError> {
        if self.window.is_zero() {
            return Err(RetentionError::ZeroWindow {
                consumer: consumer.clone(),
            });
        }
        if self.window < self.minimum_window() && !self.allow_short_window {
            return Err(RetentionError::ShorterThanHorizon {
                consumer: consumer.clone(),
                window: self.window,
                horizon: self.redelivery_horizon,
                margin: self.margin,
            });
        }
        Ok(())
    }
}

/// A retention setting that would break deduplication.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RetentionError {
    /// The window ends before redeliveries do.
    #[error(
        "retention window {window:?} for consumer `{consumer}` is shorter than its redelivery \
         horizon {horizon:?} plus margin {margin:?}: a message redelivered after its key is \
         purged would be processed a second time. Lengthen the window, or declare the risk \
         with Retention::allow_short_window(true)"
    )]
    ShorterThanHorizon {
        /// The consumer.
        consumer: ConsumerName,
        /// The window asked for.
        window: Duration,
        /// The declared redelivery horizon.
        horizon: Duration,
        /// The margin on top of it.
        margin: Duration,
    },
    /// A zero window purges keys as soon as they are written: no deduplication at all.
    #[error("retention window for consumer `{consumer}` is zero: nothing would be deduplicated")]
    ZeroWindow {
        /// The consumer.
        consumer: ConsumerName,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_window_inside_horizon_plus_margin_is_refused_unless_overridden() {
        let c = ConsumerName::new("billing").unwrap();
        let week = 7 * 24 * HOUR;
        assert!(Retention::new(week + 24 * HOUR, week).check(&c).is_ok());
        let short = Retention::new(week + 23 * HOUR, week);
        let err = short.check(&c).unwrap_err();
        assert!(matches!(err, RetentionError::ShorterThanHorizon { .. }));
        assert!(err.to_string().contains("processed a second time"), "{err}");
        assert!(short.allow_short_window(true).check(&c).is_ok());
        assert!(
            Retention::new(week + HOUR, week)
                .margin(HOUR)
                .check(&c)
                .is_ok()
        );
        assert!(matches!(
            Retention::new(Duration::ZERO, Duration::ZERO)
                .allow_short_window(true)
                .check(&c),
            Err(RetentionError::ZeroWindow { .. })
        ));
    }
}
