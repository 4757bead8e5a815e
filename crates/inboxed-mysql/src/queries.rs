//! The MySQL SQL files. This is the only place SQL text enters Rust.

/// The server's version and settings ([`crate::MySqlStore::check_server`]); no identifiers.
pub(crate) const CHECK_SERVER: &str = include_str!("../sql/check_server.sql");
