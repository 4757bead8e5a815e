//! The stored form of a message id in the processed keys (docs/key-format.md, "Stored form").
//! The same rule as migration 1's `message_key()` SQL function, which stays for operators:
//! computing it here spares the claim a function call that PostgreSQL cannot inline (it costs
//! about an eighth of the claim's rate, measured with pgbench).

use std::borrow::Cow;

/// The bytes a processed key stores for `id`: a canonical UUID (lowercase, hyphenated) as its
/// 16 bytes; any other id as its UTF-8 bytes, followed by `0xFF` when they are 16 bytes long.
/// One-to-one: 16 bytes is always a UUID, and UTF-8 never contains `0xFF`.
#[must_use]
pub fn message_key(id: &str) -> Cow<'_, [u8]> {
    if let Some(uuid) = canonical_uuid(id) {
        return Cow::Owned(uuid.to_vec());
    }
    if id.len() == 16 {
        let mut marked = Vec::with_capacity(17);
        marked.extend_from_slice(id.as_bytes());
        marked.push(0xFF);
        return Cow::Owned(marked);
    }
    Cow::Borrowed(id.as_bytes())
}

/// The 16 bytes of `id` if it is a UUID in canonical form (8-4-4-4-12 lowercase hex digits).
fn canonical_uuid(id: &str) -> Option<[u8; 16]> {
    let text = id.as_bytes();
    if text.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut digits = text
        .iter()
        .enumerate()
        .filter(|(i, _)| !matches!(i, 8 | 13 | 18 | 23));
    if [8, 13, 18, 23].iter().any(|&i| text[i] != b'-') {
        return None;
    }
    for byte in &mut out {
        let (_, &hi) = digits.next()?;
        let (_, &lo) = digits.next()?;
        *byte = (hex(hi)? << 4) | hex(lo)?;
    }
    Some(out)
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::message_key;

    #[test]
    fn uuids_take_16_bytes_and_only_canonical_ones() {
        let uuid = "0190b3c4-5d6e-7f80-9a1b-2c3d4e5f6071";
        assert_eq!(
            &*message_key(uuid),
            &[
                0x01, 0x90, 0xb3, 0xc4, 0x5d, 0x6e, 0x7f, 0x80, 0x9a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f,
                0x60, 0x71
            ]
        );
        for other in [
            uuid.to_uppercase(),
            uuid.replace('-', ""),
            uuid.replacen('-', "x", 1),
            "0190b3c4-5d6e-7f80-9a1b-2c3d4e5f607g".to_owned(),
        ] {
            assert_eq!(&*message_key(&other), other.as_bytes(), "{other}");
        }
    }

    #[test]
    fn sixteen_byte_texts_are_marked() {
        assert_eq!(&*message_key("0123456789abcdef"), b"0123456789abcdef\xff");
        assert_eq!(&*message_key("order-42"), b"order-42");
    }
}
