//! The outbox's operations, for every engine.

use super::{Args, Conn, Engine};
use crate::envelope::ConsumerName;
use crate::error::StoreError;
use crate::outbox::store::WriteParams;

/// Inserts one outgoing message in the caller's transaction (`outbox_write.sql`).
///
/// # Errors
/// The statement failed.
pub async fn write<E: Engine>(
    e: &E,
    conn: &mut Conn<E>,
    p: &WriteParams<'_>,
) -> Result<(), StoreError> {
    let m = p.message;
    let q = e
        .query(&e.queries().outbox_write)
        .text(p.message_id.as_str())
        .text(m.destination())
        .opt_text(m.ordering_key())
        .opt_text(m.message_type())
        .opt_text(m.correlation_id())
        .text(&m.headers_json())
        .bytes(m.payload())
        .opt_text(p.caused_by_consumer.map(ConsumerName::as_str))
        .opt_text(p.caused_by_message_id);
    E::execute(q, conn).await.map(drop)
}
