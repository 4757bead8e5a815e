//! What the backends' migration runners share: which embedded migrations are missing, and
//! whether the applied ones still match this build. Each backend does its own I/O and locking.

use sha2::{Digest, Sha256};

use crate::error::StoreError;

/// One embedded migration template.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Version, the same number in every backend's directory.
    pub version: i64,
    /// Short description stored beside the version.
    pub description: &'static str,
    /// The SQL template (before the namespace is rendered).
    pub sql: &'static str,
}

impl Migration {
    /// SHA-256 of the template, so that the checksum does not depend on the namespace.
    #[must_use]
    pub fn checksum(&self) -> Vec<u8> {
        Sha256::digest(self.sql).to_vec()
    }
}

/// The migrations in order, each from the file `migrations/<NNNN>_<description>.sql` of the
/// crate that invokes it. The one list of versions every engine has: an engine provides a
/// file for each (the compiler names one that is missing; a version may do nothing on an
/// engine it does not concern), and the numbering cannot part between engines.
#[macro_export]
macro_rules! migrations {
    () => {
        &[
            $crate::migration!(1, "0001_inbox", "inbox"),
            $crate::migration!(2, "0002_inbox_messages", "inbox_messages"),
            $crate::migration!(3, "0003_inbox_claim_indexes", "inbox_claim_indexes"),
            $crate::migration!(4, "0004_processed_expiry", "processed_expiry"),
            $crate::migration!(5, "0005_processed_log", "processed_log"),
            $crate::migration!(6, "0006_inbox_payload_redacted", "inbox_payload_redacted"),
            $crate::migration!(7, "0007_inbox_contract", "inbox_contract"),
            $crate::migration!(8, "0008_inbox_dead_index", "inbox_dead_index"),
            $crate::migration!(9, "0009_inbox_contract_v2", "inbox_contract_v2"),
            $crate::migration!(10, "0010_inbox_contract_v3", "inbox_contract_v3"),
            $crate::migration!(11, "0011_outbox", "outbox"),
            $crate::migration!(12, "0012_outbox_operations", "outbox_operations"),
            $crate::migration!(13, "0013_outbox_lock_held", "outbox_lock_held"),
            $crate::migration!(14, "0014_payload_json", "payload_json"),
            $crate::migration!(15, "0015_attempts_forgiven", "attempts_forgiven"),
            $crate::migration!(16, "0016_outbox_unmarked", "outbox_unmarked"),
            $crate::migration!(17, "0017_kill_switches", "kill_switches"),
            $crate::migration!(18, "0018_inbox_headers", "inbox_headers"),
            $crate::migration!(
                19,
                "0019_inbox_claim_token_index",
                "inbox_claim_token_index"
            ),
        ]
    };
}

/// One entry of [`migrations!`].
#[doc(hidden)]
#[macro_export]
macro_rules! migration {
    ($version:literal, $file:literal, $description:literal) => {
        $crate::migration::Migration {
            version: $version,
            description: $description,
            sql: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/migrations/",
                $file,
                ".sql"
            )),
        }
    };
}

/// Compares the `(version, checksum)` rows already applied with the embedded list and returns
/// the migrations still to apply, in order.
///
/// # Errors
/// [`StoreError::MigrationChanged`] when an applied migration's checksum differs, and
/// [`StoreError::MigrationUnknown`] when the database is ahead of this build.
pub fn pending<'a>(
    embedded: &'a [Migration],
    applied: &[(i64, Vec<u8>)],
) -> Result<Vec<&'a Migration>, StoreError> {
    for (version, checksum) in applied {
        match embedded.iter().find(|m| m.version == *version) {
            None => return Err(StoreError::MigrationUnknown { version: *version }),
            Some(m) if &m.checksum() != checksum => {
                return Err(StoreError::MigrationChanged { version: *version });
            }
            Some(_) => {}
        }
    }
    Ok(embedded
        .iter()
        .filter(|m| !applied.iter().any(|(v, _)| *v == m.version))
        .collect())
}

/// The versions of [`pending`], for a status report.
///
/// # Errors
/// As [`pending`].
pub fn pending_versions(
    embedded: &[Migration],
    applied: &[(i64, Vec<u8>)],
) -> Result<Vec<i64>, StoreError> {
    Ok(pending(embedded, applied)?
        .iter()
        .map(|m| m.version)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &[Migration] = &[
        Migration {
            version: 1,
            description: "a",
            sql: "create table a (x int)",
        },
        Migration {
            version: 2,
            description: "b",
            sql: "create table b (x int)",
        },
    ];

    #[test]
    fn plans_missing_and_refuses_drift() {
        assert_eq!(pending(M, &[]).unwrap().len(), 2);
        let one = vec![(1, M[0].checksum())];
        assert_eq!(pending(M, &one).unwrap()[0].version, 2);
        assert!(matches!(
            pending(M, &[(1, vec![0; 32])]),
            Err(StoreError::MigrationChanged { version: 1 })
        ));
        assert!(matches!(
            pending(M, &[(9, vec![])]),
            Err(StoreError::MigrationUnknown { version: 9 })
        ));
    }
}
