//! The NATS screen over any byte stream a server could send, read in any chunking: it never
//! panics, and its output does not depend on how the reads were cut.
#![no_main]
#![allow(dead_code)]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/inboxed-nats/src/screen.rs"]
mod screen;

use screen::screen_all as screen;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let whole = screen(stream, stream.len().max(1));
    let pieces = screen(stream, usize::from(cut % 13) + 1);
    assert_eq!(whole, pieces, "the same bytes whatever the reads");
    if whole.1 == 0 && !stream.windows(4).any(|w| w == b"MSG ") {
        assert_eq!(
            whole.0, stream,
            "what holds no message passes byte for byte"
        );
    }
});
