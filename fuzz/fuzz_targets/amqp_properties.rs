//! The screen's lenient reader of a content header's properties against lapin's own parser:
//! when lapin reads them, the reader finds no flaw but the two it is stricter on (a header
//! name given twice, which lapin collapses to one, and the flags' continuation bit, which lapin
//! ignores and so reads the next flags word as properties: found by this target); when lapin
//! cannot, it names at least one.
#![no_main]
#![allow(dead_code)]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/inboxed-rabbitmq/src/wire.rs"]
mod wire;

fn flaws(props: &[u8]) -> Vec<String> {
    wire::read_properties(props)
        .flaws
        .iter()
        .map(ToString::to_string)
        .collect()
}

fuzz_target!(|props: &[u8]| {
    let mut payload = vec![0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    payload.extend_from_slice(props);
    let mut frame = vec![2, 0, 1];
    frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    frame.extend_from_slice(&payload);
    frame.push(0xCE);
    let lapin_reads = amq_protocol::frame::parsing::parse_frame(frame.as_slice()).is_ok();
    let found = flaws(props);
    if lapin_reads {
        assert!(
            found.iter().all(|f| f.ends_with("appears more than once")
                || f.starts_with("property flags: the continuation bit")),
            "lapin reads what the screen flags: {found:?}"
        );
    } else {
        assert!(!found.is_empty(), "lapin fails on what the screen passes");
    }
});
