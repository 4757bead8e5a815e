//! What a primary's standbys mean for a commit the consumers acknowledged: read by
//! `check_durability.sql`, turned into the start-up warnings of
//! [`DurabilityReport::warnings`](inboxed_core::store::DurabilityReport::warnings).

use inboxed_core::StoreError;
use inboxed_core::store::DurabilityReport;

/// What `check_durability.sql` read: [`StoreError::NonDurable`] for a setting that loses
/// acknowledged commits, else the settings and what a failover could still lose.
pub(crate) fn report(
    sync: String,
    fsync: String,
    standbys: Standbys,
) -> Result<DurabilityReport, StoreError> {
    if sync == "off" {
        return Err(StoreError::NonDurable {
            setting: "synchronous_commit",
            value: sync,
            hint: "Set synchronous_commit = on (ALTER DATABASE ... SET synchronous_commit = on), \
                   or set ProcessorConfig::allow_non_durable_commits if losing the last \
                   moments of work on a server crash is acceptable.",
        });
    }
    if fsync == "off" {
        return Err(StoreError::NonDurable {
            setting: "fsync",
            value: fsync,
            hint: "Turn fsync on in postgresql.conf, or set \
                   ProcessorConfig::allow_non_durable_commits knowingly.",
        });
    }
    let warnings = standbys.warnings(&sync);
    Ok(DurabilityReport {
        settings: vec![
            ("synchronous_commit", sync),
            ("fsync", fsync),
            ("synchronous_standby_names", standbys.names),
        ],
        warnings,
    })
}

/// The replication a primary reports (`check_durability.sql`).
pub(crate) struct Standbys {
    pub(crate) in_recovery: bool,
    /// `synchronous_standby_names`.
    pub(crate) names: String,
    /// Standbys streaming from this server.
    pub(crate) streaming: i64,
    /// Those that are synchronous (`sync` or `quorum`).
    pub(crate) synchronous: i64,
    /// Those whose state this role may not read.
    pub(crate) unreadable: i64,
}

impl Standbys {
    /// What can lose an acknowledged commit in a failover, with `synchronous_commit` = `sync`.
    pub(crate) fn warnings(&self, sync: &str) -> Vec<String> {
        if self.in_recovery || self.streaming == 0 {
            return Vec::new();
        }
        let lose = "a failover to one of them can lose commits the consumers acknowledged, and \
                    the messages are then processed again";
        if self.names.trim().is_empty() {
            return vec![format!(
                "{} standby(s) replicate asynchronously (synchronous_standby_names is empty): \
                 {lose}. Name them in synchronous_standby_names, or fail over only to a standby \
                 that has caught up (docs/guarantees.md, \"Deployments\")",
                self.streaming
            )];
        }
        let mut out = Vec::new();
        if sync == "local" {
            out.push(format!(
                "synchronous_commit = local: commits do not wait for the synchronous standbys \
                 ({}), so {lose}",
                self.names
            ));
        }
        let asynchronous = self.streaming - self.synchronous - self.unreadable;
        if asynchronous > 0 {
            out.push(format!(
                "{asynchronous} of {} standby(s) replicate asynchronously \
                 (synchronous_standby_names = '{}'): {lose}; promote only a synchronous one",
                self.streaming, self.names
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Standbys;

    fn standbys(names: &str, streaming: i64, synchronous: i64, unreadable: i64) -> Standbys {
        Standbys {
            in_recovery: false,
            names: names.to_owned(),
            streaming,
            synchronous,
            unreadable,
        }
    }

    #[test]
    fn asynchronous_standbys_are_warned_about_and_synchronous_ones_are_not() {
        assert!(
            standbys("", 0, 0, 0).warnings("on").is_empty(),
            "no standby"
        );
        let all_async = standbys("", 2, 0, 0).warnings("on");
        assert_eq!(all_async.len(), 1);
        assert!(all_async[0].contains("2 standby(s) replicate asynchronously"));
        assert!(standbys("'s1'", 1, 1, 0).warnings("on").is_empty());
        let one_async = standbys("s1", 2, 1, 0).warnings("on");
        assert!(one_async[0].contains("1 of 2"), "{one_async:?}");
        assert!(
            standbys("s1", 2, 0, 2).warnings("on").is_empty(),
            "a role that cannot read sync_state is not told what cannot be known"
        );
        let local = standbys("s1", 1, 1, 0).warnings("local");
        assert!(local[0].contains("synchronous_commit = local"), "{local:?}");
        let mut standby = standbys("", 1, 0, 0);
        standby.in_recovery = true;
        assert!(standby.warnings("on").is_empty(), "a standby itself");
    }
}
