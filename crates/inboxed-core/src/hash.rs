//! Payload hashes: what a processed key keeps of its payload, so that a *different* payload
//! under an already processed key is reported instead of silently skipped.

use std::fmt;

use sha2::{Digest, Sha256};

/// SHA-256 of the raw payload bytes (hash format v1).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PayloadHash([u8; 32]);

impl PayloadHash {
    /// Hashes the payload exactly as received: no JSON canonicalisation, no headers.
    #[must_use]
    pub fn of(payload: &[u8]) -> Self {
        Self(Sha256::digest(payload).into())
    }

    /// Reads a stored hash; `None` when the stored value is not 32 bytes (another format).
    #[must_use]
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }

    /// The 32 digest bytes as stored.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The first 4 bytes, big-endian: what a compact store keeps. Two different payloads share
    /// it once in 2^32, which is all a check for a reused key needs; a key costs 4 bytes a row
    /// instead of 32.
    #[must_use]
    pub fn fingerprint(&self) -> u32 {
        u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }
}

impl fmt::Debug for PayloadHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", hex::encode(self.0))
    }
}

impl fmt::Display for PayloadHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What the store kept of the payload hash when a key was first processed: the whole hash
/// (SQLite) or its 4-byte [fingerprint](PayloadHash::fingerprint) (PostgreSQL's compact keys).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum StoredHash {
    /// The whole SHA-256.
    Full(PayloadHash),
    /// Its first 4 bytes.
    Fingerprint(u32),
}

impl StoredHash {
    /// Whether `received` may be the payload that was stored: equal hashes, or equal
    /// fingerprints, which a different payload has once in 2^32.
    #[must_use]
    pub fn matches(&self, received: &PayloadHash) -> bool {
        match self {
            Self::Full(stored) => stored == received,
            Self::Fingerprint(stored) => *stored == received.fingerprint(),
        }
    }
}

impl fmt::Display for StoredHash {
    /// A fingerprint prints as the prefix of the hash it came from (`sha256:1a2b3c4d…`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(h) => fmt::Display::fmt(h, f),
            Self::Fingerprint(p) => write!(f, "sha256:{p:08x}…"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_sha256_of_raw_bytes() {
        let h = PayloadHash::of(b"abc");
        assert_eq!(
            format!("{h}"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(h.fingerprint(), 0xba78_16bf);
        assert_eq!(
            StoredHash::Fingerprint(0xba78_16bf).to_string(),
            "sha256:ba7816bf…"
        );
    }

    #[test]
    fn stored_forms_match_only_their_payload() {
        let (a, b) = (PayloadHash::of(b"a"), PayloadHash::of(b"b"));
        assert!(StoredHash::Full(a).matches(&a));
        assert!(!StoredHash::Full(a).matches(&b));
        assert!(StoredHash::Fingerprint(a.fingerprint()).matches(&a));
        assert!(!StoredHash::Fingerprint(a.fingerprint()).matches(&b));
    }
}
