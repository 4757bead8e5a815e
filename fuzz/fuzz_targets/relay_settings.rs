//! The relay's TOML settings and its `--key` forms: any file and any key text parse or fail
//! with an error, never a panic.
#![no_main]
#![allow(dead_code, unused_imports, unexpected_cfgs)]

use libfuzzer_sys::fuzz_target;

// The CLI is a binary; its settings module is self-contained and included as it is.
#[path = "../../crates/inboxed-cli/src/cli/relay/settings.rs"]
mod settings;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = toml::from_str::<settings::Args>(text);
    if let Ok(key) = settings::parse_key(text) {
        let _ = format!("{key:?}");
    }
});
