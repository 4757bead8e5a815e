//! What the NATS test files share: a stream of one test's own, filled with keyed messages.

// Each test binary includes this module and uses only part of it.
#![allow(clippy::unwrap_used, dead_code)]

use async_nats::HeaderMap;
use async_nats::jetstream::{self, Context};

use inboxed_test::credit;
use inboxed_test::restart::{MESSAGES, amount};

/// Creates stream `name` (file storage) on `subject`.
pub(crate) async fn create_stream(js: &Context, name: &str, subject: &str) {
    js.create_stream(jetstream::stream::Config {
        name: name.to_owned(),
        subjects: vec![subject.to_owned()],
        storage: jetstream::stream::StorageType::File,
        ..jetstream::stream::Config::default()
    })
    .await
    .unwrap();
}

/// Publishes [`MESSAGES`] messages keyed `<prefix>-<i>` (`Nats-Msg-Id`) crediting
/// [`amount`]`(i)`, waiting for every publish ack.
pub(crate) async fn publish_restart_messages(js: &Context, subject: &str, prefix: &str) {
    let mut acks = Vec::new();
    for i in 0..MESSAGES {
        let id = format!("{prefix}-{i}");
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", id.as_str());
        let body = credit(&id, amount(i)).payload().to_vec();
        acks.push(
            js.publish_with_headers(subject.to_owned(), headers, body.into())
                .await
                .unwrap(),
        );
        // The client bounds acks in flight: collect them as we go.
        if acks.len() == 256 {
            for ack in acks.drain(..) {
                ack.await.unwrap();
            }
        }
    }
    for ack in acks {
        ack.await.unwrap();
    }
}
