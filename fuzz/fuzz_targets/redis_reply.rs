//! Stream replies from any bytes Redis could send (parsed as RESP by redis-rs first): reading
//! entries (of a read, of a claim) or claimed ids never panics, and every entry read has a text
//! id.
#![no_main]
#![allow(dead_code)]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/inboxed-redis/src/entry.rs"]
mod entry;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = redis::parse_redis_value(data) {
        let read = entry::read_reply(value.clone()).unwrap_or_default();
        let claimed = entry::entries(value.clone()).unwrap_or_default();
        // An `XAUTOCLAIM … JUSTID` reply: read without a panic, whatever it holds.
        let _ = entry::claimed_ids(value);
        for e in read.iter().chain(&claimed) {
            let _ = e.repeated();
            assert!(e.fields.iter().all(|(n, _)| e.get(n).is_some()));
        }
    }
});
