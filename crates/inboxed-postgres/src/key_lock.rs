//! The lock that keeps a key "processed" or "dead-lettered", never both, on an engine whose
//! reads do not wait for another transaction's uncommitted insert (PostgreSQL).
//!
//! The claim and the dead letter each check the other's table before writing their own. Under
//! READ COMMITTED neither check sees the other's uncommitted row, so a dead letter written
//! while a claim of its key is in flight (a redelivery that exhausted its attempts beside a
//! slow first delivery; a permanent failure beside a duplicate that succeeds) commits beside
//! it: the key ends processed *and* on the dead-letter path, and an operator's retry of that
//! dead letter reports a duplicate. Only a unique index makes PostgreSQL wait for an
//! uncommitted row, and the two rows live in different tables.
//!
//! So both paths take a transaction-scoped advisory lock on the key: a claim transaction a
//! **shared** one, taken before its claim statement runs (in the same round trip as its
//! `BEGIN`), and the dead letter an **exclusive** one, before it checks for a processed row.
//! Claims never wait for each other (a duplicate still waits on the unique index, as before),
//! a dead letter waits for the key's claims in flight and then sees their commits, and a claim
//! that arrives while a dead letter holds the key waits and then sees the dead letter, because
//! its claim statement takes its snapshot after the lock was granted.
//!
//! The lock ids are computed here, not by the server, so that the claim's lock can travel
//! inside the `BEGIN` without a statement of its own. They are part of the storage contract:
//! every process sharing a database must compute them alike (SHA-256, below).
//!
//! A transaction that claims more than [`MAX_KEY_LOCKS`] keys locks their buckets instead
//! ([`BUCKETS`] per consumer): the server's lock table is sized by `max_locks_per_transaction`
//! (64 by default, pooled across connections), and a batch of a thousand keys per worker would
//! otherwise fill it. A dead letter therefore takes its key's bucket as well as its key; it
//! then also waits for the large batches in flight that hold the bucket, which costs only the
//! (rare) dead letter, never a claim.

use sha2::{Digest, Sha256};

use inboxed_core::ConsumerName;

/// The most keys a claim transaction locks one by one; above it, it locks their buckets.
pub const MAX_KEY_LOCKS: usize = 64;

/// Buckets per consumer for transactions claiming more than [`MAX_KEY_LOCKS`] keys.
pub const BUCKETS: u64 = 64;

/// The first eight bytes of SHA-256 over a domain tag, the consumer and `tail`, as an `int8`.
fn lock_id(tag: &[u8], consumer: &ConsumerName, tail: &[u8]) -> i64 {
    let mut h = Sha256::new();
    h.update(tag);
    h.update(consumer.as_str().as_bytes());
    h.update([0]);
    h.update(tail);
    let digest = h.finalize();
    let mut first = [0; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// The lock id of one key of `consumer`.
#[must_use]
pub fn key_lock(consumer: &ConsumerName, message_id: &str) -> i64 {
    lock_id(b"inboxed key lock\0", consumer, message_id.as_bytes())
}

/// The lock id of the bucket that holds `message_id`'s key.
#[must_use]
pub fn bucket_lock(consumer: &ConsumerName, message_id: &str) -> i64 {
    let bucket = key_lock(consumer, message_id).cast_unsigned() % BUCKETS;
    lock_id(b"inboxed bucket lock\0", consumer, &bucket.to_be_bytes())
}

/// The locks a transaction claiming `ids` takes: each key's, or, past [`MAX_KEY_LOCKS`]
/// keys, each distinct bucket's. Sorted, without repeats.
#[must_use]
pub fn claim_locks(consumer: &ConsumerName, ids: &[&str]) -> Vec<i64> {
    let lock = if ids.len() > MAX_KEY_LOCKS {
        bucket_lock
    } else {
        key_lock
    };
    let mut locks: Vec<i64> = ids.iter().map(|id| lock(consumer, id)).collect();
    locks.sort_unstable();
    locks.dedup();
    locks
}

#[cfg(test)]
mod tests {
    use super::*;

    fn consumer(name: &str) -> ConsumerName {
        ConsumerName::new(name).expect("valid name")
    }

    /// The ids are a storage contract: processes of different builds sharing a database must
    /// lock alike. A change to the derivation fails here before it ships.
    #[test]
    fn lock_ids_are_stable() {
        let c = consumer("ledger");
        assert_eq!(key_lock(&c, "m-1"), key_lock(&c, "m-1"));
        assert_ne!(key_lock(&c, "m-1"), key_lock(&c, "m-2"));
        assert_ne!(key_lock(&c, "m-1"), key_lock(&consumer("other"), "m-1"));
        // The consumer and the id are kept apart: "ab" + "c" is not "a" + "bc".
        assert_ne!(
            key_lock(&consumer("ab"), "c"),
            key_lock(&consumer("a"), "bc")
        );
        assert_eq!(key_lock(&c, "m-1"), KEY_LOCK_OF_LEDGER_M1);
    }

    const KEY_LOCK_OF_LEDGER_M1: i64 = 9_120_911_094_581_739_882;

    #[test]
    fn large_claims_lock_at_most_every_bucket() {
        let c = consumer("ledger");
        let ids: Vec<String> = (0..1000).map(|i| format!("m-{i}")).collect();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let small = claim_locks(&c, &ids[..MAX_KEY_LOCKS]);
        assert_eq!(small.len(), MAX_KEY_LOCKS);
        assert!(small.contains(&key_lock(&c, ids[0])));
        let large = claim_locks(&c, &ids);
        assert!(large.len() <= usize::try_from(BUCKETS).expect("small"));
        assert!(large.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        for id in &ids {
            assert!(
                large.contains(&bucket_lock(&c, id)),
                "{id}'s bucket is locked"
            );
        }
    }
}
