//! The one TLS setting the broker adapters share: a PEM file of certificate authorities to
//! trust, for brokers whose certificates a private CA signs. Host names are always checked;
//! there is no setting to turn verification off.

use std::path::{Path, PathBuf};

/// Why a CA file cannot be used. Read at connect, so that a wrong path fails the start with its
/// name rather than as a handshake error on every reconnect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaFileError {
    /// The file could not be read.
    #[error("cannot read the TLS CA file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no PEM certificate (a key, or DER, would otherwise be ignored silently
    /// and every handshake fail as if the broker's certificate were untrusted).
    #[error("the TLS CA file {} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
}

/// The PEM text of `path`, checked to hold at least one certificate.
///
/// # Errors
/// [`CaFileError`] naming the file.
pub fn read_ca_file(path: &Path) -> Result<String, CaFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| CaFileError::Read {
        path: path.to_owned(),
        source,
    })?;
    if text.contains("-----BEGIN CERTIFICATE-----") {
        Ok(text)
    } else {
        Err(CaFileError::NoCertificate {
            path: path.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_file_without_a_certificate_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.pem");
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nMC4=\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let err = read_ca_file(&key).unwrap_err().to_string();
        assert!(
            err.contains("key.pem") && err.contains("no PEM certificate"),
            "{err}"
        );
        let err = read_ca_file(&dir.path().join("missing.pem")).unwrap_err();
        assert!(matches!(err, CaFileError::Read { .. }), "{err}");
        let ca = dir.path().join("ca.pem");
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nMC4=\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert!(read_ca_file(&ca).is_ok());
    }
}
