//! A list of messages cut into runs that each fit one statement. MySQL binds no arrays, so a
//! set-based write carries its messages as one JSON text, payloads in base64; the statement
//! travels as one packet, which the server refuses above its `max_allowed_packet` (16 MiB by
//! default on MariaDB, 64 MiB on MySQL 8).

/// The most payload, in base64, one statement carries: a quarter of MariaDB's default packet,
/// leaving room for the rest of each message and the JSON around it.
pub(crate) const PART_BYTES: usize = 4 << 20;

/// `items` cut into runs, in order: `(run, true)` for items that share one statement (their
/// payloads, `payload_len` bytes each, at most [`PART_BYTES`] in base64 together), and
/// `(one, false)` for an item larger than that, to be written on its own with its payload
/// bound as bytes.
pub(crate) fn parts<T>(items: &[T], payload_len: impl Fn(&T) -> usize) -> Vec<(&[T], bool)> {
    let mut parts = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let size = payload_len(item).div_ceil(3) * 4;
        if size > PART_BYTES || bytes + size > PART_BYTES {
            if start < i {
                parts.push((&items[start..i], true));
            }
            start = i;
            bytes = 0;
        }
        if size > PART_BYTES {
            parts.push((&items[i..=i], false));
            start = i + 1;
        } else {
            bytes += size;
        }
    }
    if start < items.len() {
        parts.push((&items[start..], true));
    }
    parts
}

/// `bytes` in base64, as `FROM_BASE64` reads it.
pub(crate) fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs keep the list's order, stay within the budget, and an item past the budget goes
    /// alone.
    #[test]
    fn a_list_is_cut_into_runs_within_the_budget_and_large_items_alone() {
        let third = PART_BYTES / 4; // a third of the budget once in base64
        let sizes = [10, third, third, third, PART_BYTES, 10];
        let cut = parts(&sizes, |n| *n);
        let shape: Vec<(usize, bool)> = cut.iter().map(|(r, s)| (r.len(), *s)).collect();
        assert_eq!(shape, [(3, true), (1, true), (1, false), (1, true)]);
        let flat: Vec<usize> = cut.iter().flat_map(|(r, _)| r.iter().copied()).collect();
        assert_eq!(flat, sizes);
        assert!(parts(&[] as &[usize], |n| *n).is_empty());
    }
}
