//! The outcomes of a batch receipt, from what an engine's statements reported: shared by every
//! engine whose batch insert returns the keys it stored.

use crate::envelope::Envelope;
use crate::hash::PayloadHash;

use super::store::Enqueued;

/// The outcome of each message of a batch receipt, in order, from what the engine reported:
/// the ids of the keys its insert stored (`inserted`, by key) and the stored payload hashes of
/// the others (`stored`, read in the same transaction). A key given twice is stored at its
/// first position; later ones are duplicates or conflicts of it.
#[must_use]
pub fn receipt_outcomes(
    envelopes: &[Envelope],
    inserted: &std::collections::HashMap<String, i64>,
    stored: &std::collections::HashMap<String, PayloadHash>,
) -> Vec<Enqueued> {
    let mut first = std::collections::HashMap::<&str, PayloadHash>::new();
    envelopes
        .iter()
        .map(|env| {
            let key = env.id().as_str();
            if let Some(&id) = inserted.get(key)
                && !first.contains_key(key)
            {
                first.insert(key, env.hash());
                return Enqueued::Stored { id };
            }
            let earlier = first.get(key).copied().or_else(|| stored.get(key).copied());
            match earlier {
                Some(hash) if hash != env.hash() => Enqueued::Conflict {
                    stored: hash,
                    received: env.hash(),
                },
                _ => Enqueued::Duplicate,
            }
        })
        .collect()
}
