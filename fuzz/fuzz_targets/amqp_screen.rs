//! The RabbitMQ screen over any byte stream a broker could send, read in any chunking: it
//! never panics, its output does not depend on how the reads were cut, and every content
//! header it hands lapin is one lapin's own parser reads (the property that keeps a queue from
//! stopping).
#![no_main]
#![allow(dead_code)]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/inboxed-rabbitmq/src/screen.rs"]
mod screen;
#[path = "../../crates/inboxed-rabbitmq/src/wire.rs"]
mod wire;

fn screen(bytes: &[u8], chunk: usize) -> Vec<u8> {
    screen::screen_all(bytes, chunk).0
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    let whole = screen(stream, stream.len().max(1));
    let pieces = screen(stream, usize::from(cut % 17) + 1);
    assert_eq!(whole, pieces, "the same bytes whatever the reads");
    let mut at = whole.as_slice();
    while at.len() >= 8 {
        if at.starts_with(b"AMQP") {
            at = &at[8..];
            continue;
        }
        let size = u32::from_be_bytes([at[3], at[4], at[5], at[6]]) as usize;
        let Some(frame) = at.get(..size + 8) else {
            break;
        };
        if frame[0] == 2 && size >= 14 && frame[size + 7] == 0xCE {
            assert!(
                amq_protocol::frame::parsing::parse_frame(frame).is_ok(),
                "lapin would fail on a screened header: {frame:?}"
            );
        }
        at = &at[size + 8..];
    }
});
