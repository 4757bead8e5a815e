//! The retry and discard of dead outbox rows.

use crate::common::{OPS, VIEWER, get_as, store_with_dead_letters};
use crate::{console, count, csrf, field, post_as};
use inboxed_sqlite::SqliteStore;

/// Three outbox rows to `orders` (two of them dead, one with key `k`) and one dead to
/// `billing`, written through the outbox and killed as a relay's refusal kills them.
async fn store_with_dead_outbox_rows(store: &SqliteStore) {
    use inboxed_core::Store;
    use inboxed_core::outbox::{Outbox, OutgoingMessage};
    let outbox = Outbox::new(store.clone());
    let mut tx = store.begin(&Default::default()).await.unwrap();
    for (destination, key, payload) in [
        ("orders", None, r#"{"order":{"id":41}}"#),
        ("orders", Some("k"), r#"{"order":{"id":42}}"#),
        ("orders", None, r#"{"order":{"id":43}}"#),
        ("billing", None, r#"{"order":{"id":42}}"#),
    ] {
        let mut m = OutgoingMessage::new(destination, payload.as_bytes().to_vec());
        if let Some(key) = key {
            m = m.with_key(key);
        }
        outbox.write(&mut tx, &m).await.unwrap();
    }
    tx.commit().await.unwrap();
    sqlx::query(
        "UPDATE inboxed_outbox_messages SET status = 'dead', attempts = 3, \
         last_error = 'NOT_ROUTED: no queue bound' WHERE id IN (1, 2, 4)",
    )
    .execute(store.pool())
    .await
    .unwrap();
}

const OUTBOX_DEAD: &str = "SELECT count(*) FROM inboxed_outbox_messages WHERE status = 'dead'";

#[tokio::test]
async fn an_operator_retries_and_discards_dead_outbox_rows_as_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    store_with_dead_outbox_rows(&store).await;
    let base = console(&store).await;

    let (status, list) = get_as(&format!("{base}/outbox?status=dead"), VIEWER).await;
    assert_eq!(status, 200, "{list}");
    assert!(list.contains("3 shown"), "{list}");
    assert!(list.contains("NOT_ROUTED"), "{list}");
    assert!(list.contains("Read-only"), "{list}");
    let (_, found) = get_as(&format!("{base}/outbox?json=order.id%3D42"), VIEWER).await;
    assert!(found.contains("2 shown"), "JSON path search: {found}");
    let (status, _) = get_as(
        &format!("{base}/outbox/act?action=retry&destination=orders"),
        VIEWER,
    )
    .await;
    assert_eq!(status, 403, "a read-only user cannot retry");
    let (status, _) = get_as(
        &format!("{base}/outbox/act?action=retry&payload=order"),
        OPS,
    )
    .await;
    assert_eq!(
        status, 400,
        "a payload search is not what a retry selects by"
    );

    let (status, confirm) = get_as(
        &format!("{base}/outbox/act?action=retry&destination=orders"),
        OPS,
    )
    .await;
    assert_eq!(status, 200, "{confirm}");
    assert!(
        confirm.contains("<strong>2</strong> dead outbox row(s) match"),
        "{confirm}"
    );
    let token = csrf(&confirm);
    let ids = field(&confirm, "ids");
    assert_eq!(ids, "1,2");
    let fields = [
        ("action", "retry"),
        ("destination", "orders"),
        ("ids", &ids),
        ("why", "queue bound now"),
        ("csrf", &token),
    ];
    let url = format!("{base}/outbox/act");
    // Before the POST, another operator retries row 2: the selection changed.
    sqlx::query("UPDATE inboxed_outbox_messages SET status = 'pending' WHERE id = 2")
        .execute(store.pool())
        .await
        .unwrap();
    let (status, again) = post_as(&url, OPS, &fields, &[]).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(count(&store, OUTBOX_DEAD).await, 2, "nothing retried");
    sqlx::query("UPDATE inboxed_outbox_messages SET status = 'dead' WHERE id = 2")
        .execute(store.pool())
        .await
        .unwrap();
    let (status, done) = post_as(&url, OPS, &fields, &[]).await;
    assert_eq!(status, 200, "{done}");
    assert!(done.contains("Retried <strong>2</strong>"), "{done}");
    assert_eq!(
        count(&store, OUTBOX_DEAD).await,
        1,
        "billing's row stays dead"
    );
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM inboxed_outbox_messages \
             WHERE id IN (1, 2) AND status = 'pending' AND attempts = 0 AND last_error IS NULL"
        )
        .await,
        2
    );

    let (_, page) = get_as(&format!("{base}/outbox/4"), OPS).await;
    assert!(
        page.contains("/outbox/act?action=discard&amp;id=4"),
        "{page}"
    );
    let (status, confirm) = get_as(&format!("{base}/outbox/act?action=discard&id=4"), OPS).await;
    assert_eq!(status, 200, "{confirm}");
    let fields = [
        ("action", "discard"),
        ("id", "4"),
        ("ids", &field(&confirm, "ids")),
        ("why", "obsolete"),
        ("csrf", &csrf(&confirm)),
    ];
    let (status, done) = post_as(&url, OPS, &fields, &[]).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(count(&store, OUTBOX_DEAD).await, 0);
    assert_eq!(
        count(&store, "SELECT count(*) FROM inboxed_outbox_messages").await,
        3,
        "row 4 deleted, the others kept"
    );
    let (_, audit) = get_as(&format!("{base}/audit"), VIEWER).await;
    assert!(
        audit.contains("outbox retry")
            && audit.contains("outbox discard")
            && audit.contains("queue bound now")
            && audit.contains("destination=&quot;orders&quot; ids=[1, 2]"),
        "{audit}"
    );
}
