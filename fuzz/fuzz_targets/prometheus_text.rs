//! The Prometheus text `inboxed stats --metrics-url` reads from another process: any text
//! parses without a panic, and every dedup rate it reports lies between 0 and 1.
#![no_main]
#![allow(dead_code, unused_imports, unexpected_cfgs)]

use libfuzzer_sys::fuzz_target;

// The CLI is a binary; its parser of the text format is self-contained and included as it is.
#[path = "../../crates/inboxed-cli/src/cli/prometheus_text.rs"]
mod prometheus_text;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for rate in prometheus_text::parse(&text) {
        if let Some(r) = rate.rate() {
            assert!((0.0..=1.0).contains(&r), "rate {r} of {rate:?}");
        }
    }
});
