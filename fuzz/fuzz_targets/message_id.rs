//! Message ids from raw bytes, CloudEvents keys and JSON-pointer keys: whatever the input, an
//! accepted key is non-empty, at most 512 bytes, free of NUL, and byte-identical to what was
//! given (plain ids) or to its escaped form (CloudEvents).
#![no_main]

use inboxed_core::{MessageId, envelope::MAX_MESSAGE_ID_BYTES};
use libfuzzer_sys::fuzz_target;

fn valid(id: &MessageId) {
    let s = id.as_str();
    assert!(
        !s.is_empty() && s.len() <= MAX_MESSAGE_ID_BYTES && !s.contains('\0'),
        "{s:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    if let Ok(id) = MessageId::from_bytes(data) {
        valid(&id);
        assert_eq!(id.as_str().as_bytes(), data, "kept byte for byte");
    }
    let text = String::from_utf8_lossy(data);
    let (source, id) = text.split_once('\n').unwrap_or((&text, ""));
    if let Ok(key) = MessageId::from_cloudevent(source, id) {
        valid(&key);
        // Exactly two separators survive the escaping: the split point is unambiguous.
        assert_eq!(key.as_str().matches('|').count(), 2, "{key:?}");
        let escaped = |s: &str| s.replace('%', "%25").replace('|', "%7C");
        assert_eq!(
            key.as_str(),
            format!("ce|{}|{}", escaped(source), escaped(id))
        );
    }
    let (pointer, body) = data.split_at(data.iter().position(|b| *b == b'\n').unwrap_or(0));
    if let Ok(pointer) = std::str::from_utf8(pointer)
        && let Ok(key) = MessageId::from_json_field(body, pointer)
    {
        valid(&key);
    }
});
