//! The guarantee suite on SQLite files.
inboxed_test::conformance_tests!(inboxed_test::Lite);
