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
