//! The database-derived gauges `inboxed serve` publishes, set from one observation.

use std::collections::BTreeSet;
use std::time::SystemTime;

use inboxed_core::observe::Observation;

/// Gauge of store-then-process rows, labelled `consumer` and `status` (`pending`,
/// `processing`, `dead`).
pub(crate) const INBOX_ROWS: &str = "inboxed_inbox_rows";
/// Gauge of the oldest pending row's age in seconds, labelled `consumer`.
pub(crate) const OLDEST_PENDING_AGE: &str = "inboxed_inbox_oldest_pending_age_seconds";
/// Gauge of claimed rows whose lease already expired, labelled `consumer`.
pub(crate) const EXPIRED_LEASES: &str = "inboxed_inbox_expired_leases";
/// Gauge of dead letters kept, labelled `consumer` and `reason`.
pub(crate) const DEAD_LETTERS: &str = "inboxed_dead_letters";
/// Gauge of outbox rows not sent yet, labelled `destination` and `status` (`pending`,
/// `sending`, `dead`).
pub(crate) const OUTBOX_ROWS: &str = "inboxed_outbox_unsent_rows";
/// Gauge of the oldest unsent outbox row's age in seconds, labelled `destination`.
pub(crate) const OUTBOX_OLDEST_UNSENT_AGE: &str = "inboxed_outbox_oldest_unsent_age_seconds";
/// Gauge of outbox rows the broker confirmed per second, over the last minute, labelled
/// `destination`.
pub(crate) const OUTBOX_SENT_RATE: &str = "inboxed_outbox_sent_per_second";
/// Gauge: 1 when the last observation succeeded, 0 when the database could not be read.
pub(crate) const UP: &str = "inboxed_observe_up";
/// Gauge of the seconds the last observation took.
pub(crate) const OBSERVE_SECONDS: &str = "inboxed_observe_duration_seconds";

/// One database's gauges: the label sets published before, so that a consumer whose backlog
/// emptied reads 0, not its last value, and the tenant every gauge is labelled with when each
/// tenant has a database of its own.
#[derive(Debug, Default)]
pub(crate) struct Published {
    tenant: Option<String>,
    consumers: BTreeSet<String>,
    letters: BTreeSet<(String, String)>,
    destinations: BTreeSet<String>,
}

impl Published {
    /// The gauges of `tenant`'s database, or of the one database when `None`.
    pub(crate) fn of(tenant: Option<String>) -> Self {
        Self {
            tenant,
            ..Self::default()
        }
    }

    pub(crate) fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// `pairs`, and the tenant's label when there is one.
    pub(crate) fn labels<const N: usize>(
        &self,
        pairs: [(&'static str, String); N],
    ) -> Vec<metrics::Label> {
        let mut labels: Vec<metrics::Label> = pairs
            .into_iter()
            .map(|(k, v)| metrics::Label::new(k, v))
            .collect();
        if let Some(tenant) = &self.tenant {
            labels.push(metrics::Label::new("tenant", tenant.clone()));
        }
        labels
    }

    /// The gauge `name` labelled with `pairs` (and the tenant).
    pub(crate) fn gauge<const N: usize>(
        &self,
        name: &'static str,
        pairs: [(&'static str, String); N],
    ) -> metrics::Gauge {
        metrics::gauge!(name, self.labels(pairs))
    }

    pub(crate) fn set(&mut self, seen: &Observation, now: SystemTime) {
        let mut consumers = BTreeSet::new();
        for b in &seen.backlog {
            let c = b.consumer.clone();
            for (status, n) in [
                ("pending", b.pending),
                ("processing", b.processing),
                ("dead", b.dead),
            ] {
                self.gauge(
                    INBOX_ROWS,
                    [("consumer", c.clone()), ("status", status.to_owned())],
                )
                .set(n as f64);
            }
            self.gauge(OLDEST_PENDING_AGE, [("consumer", c.clone())])
                .set(b.oldest_pending_age(now).as_secs_f64());
            self.gauge(EXPIRED_LEASES, [("consumer", c.clone())])
                .set(b.expired_leases as f64);
            consumers.insert(c);
        }
        for gone in self.consumers.difference(&consumers) {
            for status in ["pending", "processing", "dead"] {
                self.gauge(
                    INBOX_ROWS,
                    [("consumer", gone.clone()), ("status", status.to_owned())],
                )
                .set(0.0);
            }
            self.gauge(OLDEST_PENDING_AGE, [("consumer", gone.clone())])
                .set(0.0);
            self.gauge(EXPIRED_LEASES, [("consumer", gone.clone())])
                .set(0.0);
        }
        let mut letters = BTreeSet::new();
        for d in &seen.dead_letters {
            let key = (d.consumer.clone(), d.reason.clone());
            self.gauge(
                DEAD_LETTERS,
                [("consumer", key.0.clone()), ("reason", key.1.clone())],
            )
            .set(d.count as f64);
            letters.insert(key);
        }
        for (consumer, reason) in self.letters.difference(&letters) {
            self.gauge(
                DEAD_LETTERS,
                [("consumer", consumer.clone()), ("reason", reason.clone())],
            )
            .set(0.0);
        }
        let mut destinations = BTreeSet::new();
        for o in &seen.outbox {
            let d = o.destination.clone();
            for (status, n) in [
                ("pending", o.pending),
                ("sending", o.sending),
                ("dead", o.dead),
            ] {
                self.gauge(
                    OUTBOX_ROWS,
                    [("destination", d.clone()), ("status", status.to_owned())],
                )
                .set(n as f64);
            }
            self.gauge(OUTBOX_OLDEST_UNSENT_AGE, [("destination", d.clone())])
                .set(o.oldest_unsent_age(now).as_secs_f64());
            self.gauge(OUTBOX_SENT_RATE, [("destination", d.clone())])
                .set(o.sent_last_minute as f64 / 60.0);
            destinations.insert(d);
        }
        for gone in self.destinations.difference(&destinations) {
            for status in ["pending", "sending", "dead"] {
                self.gauge(
                    OUTBOX_ROWS,
                    [("destination", gone.clone()), ("status", status.to_owned())],
                )
                .set(0.0);
            }
            self.gauge(OUTBOX_OLDEST_UNSENT_AGE, [("destination", gone.clone())])
                .set(0.0);
            self.gauge(OUTBOX_SENT_RATE, [("destination", gone.clone())])
                .set(0.0);
        }
        self.consumers = consumers;
        self.letters = letters;
        self.destinations = destinations;
    }
}
