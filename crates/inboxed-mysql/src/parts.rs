//! A list of messages cut into runs that each fit one statement. MySQL binds no arrays, so a
//! set-based write carries its messages as one JSON text, payloads in base64; the statement
//! travels as one packet, which the server refuses above its `max_allowed_packet` (16 MiB by
//! default on MariaDB, 64 MiB on MySQL 8).

/// The most JSON one statement carries: a quarter of MariaDB's default packet.
pub(crate) const PART_BYTES: usize = 4 << 20;

/// The most bytes `payload` and `texts` take in the JSON of one item: the payload in base64,
/// each text escaped at worst to twice its length (a control character takes six bytes, but
/// ids refuse none and other fields carry few), and the JSON around them. Measured on the text
/// as it is built, not on the payload alone: 40,000 messages with 400-byte ids and small
/// payloads made about 20 MB of JSON, past the server's packet.
pub(crate) fn item_size(payload: &[u8], texts: &[Option<&str>]) -> usize {
    let texts: usize = texts.iter().flatten().map(|t| t.len() * 2 + 3).sum();
    payload.len().div_ceil(3) * 4 + texts + 16
}

/// `items` cut into runs, in order: `(run, true)` for items that share one statement (their
/// JSON, `size` bytes each at most, [`PART_BYTES`] together), and `(one, false)` for an item
/// larger than that, to be written on its own with its payload bound as bytes.
pub(crate) fn parts<T>(items: &[T], size: impl Fn(&T) -> usize) -> Vec<(&[T], bool)> {
    let mut parts = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let size = size(item);
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
        let third = PART_BYTES / 3;
        let sizes = [10, third, third, third, PART_BYTES + 1, 10];
        let cut = parts(&sizes, |n| *n);
        let shape: Vec<(usize, bool)> = cut.iter().map(|(r, s)| (r.len(), *s)).collect();
        assert_eq!(shape, [(3, true), (1, true), (1, false), (1, true)]);
        let flat: Vec<usize> = cut.iter().flat_map(|(r, _)| r.iter().copied()).collect();
        assert_eq!(flat, sizes);
        assert!(parts(&[] as &[usize], |n| *n).is_empty());
    }

    /// The size counted for an item bounds its JSON as the statements build it, ids included:
    /// 40,000 messages of 400-byte ids and small payloads go in parts each within the budget.
    #[test]
    fn parts_are_bounded_by_their_json_not_their_payloads() {
        let id = "é\"\\x".repeat(100);
        let items: Vec<(String, Vec<u8>)> =
            (0..40_000).map(|_| (id.clone(), vec![7; 30])).collect();
        let size = |(id, payload): &(String, Vec<u8>)| item_size(payload, &[Some(id)]);
        let cut = parts(&items, size);
        assert!(cut.len() >= 5, "{} parts", cut.len());
        for (run, shared) in cut {
            assert!(shared);
            let json: Vec<serde_json::Value> = run
                .iter()
                .map(|(id, payload)| serde_json::json!([id, base64(payload)]))
                .collect();
            let text = serde_json::Value::Array(json).to_string();
            assert!(text.len() <= PART_BYTES, "{} bytes", text.len());
            assert!(run.iter().map(size).sum::<usize>() >= text.len());
        }
    }
}
