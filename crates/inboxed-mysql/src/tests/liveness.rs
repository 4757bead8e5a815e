//! Workers' liveness through named locks: a live worker is neither dead nor forgotten, a dead
//! one is both, and the same id cannot register twice.

use super::*;

use inboxed_core::inbox::store::InboxStore;

/// Registrations in the table.
const WORKERS: &str = "SELECT COUNT(*) FROM inboxed_workers";

/// The reaper's probes while the worker lives and after its session ends. A probe that took
/// a row's presence for liveness (or a forget that ignored the lock) would report the live
/// worker dead, or delete its registration: both asserted against here, as is the end of a
/// session freeing the lock (a lock that outlived its session would keep a dead worker alive).
/// The id is long and full of quotes and slashes: the lock's name is a hash of it, within
/// MySQL's 64 characters.
#[tokio::test]
async fn a_live_worker_is_neither_dead_nor_forgotten_and_a_dead_one_is_both() {
    let db = TestDb::new().await;
    inboxed_core::Store::migrate(&db.store)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let id = format!("1234-abcd/w'1\"\\/{}", "x".repeat(300));
    let live = db
        .store
        .hold_liveness(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("registered"));
    assert_eq!(db.count(WORKERS).await, 1);
    assert_eq!(
        db.store
            .dead_workers()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        Vec::<String>::new(),
        "a live worker is not dead"
    );
    let forgotten = db.store.forget_workers(std::slice::from_ref(&id)).await;
    assert_eq!(forgotten.unwrap_or_else(|e| panic!("{e}")), 0);
    assert_eq!(
        db.count(WORKERS).await,
        1,
        "a live worker keeps its registration"
    );

    let twice = db.store.hold_liveness(&id).await;
    assert!(
        twice.unwrap_or_else(|e| panic!("{e}")).is_none(),
        "the same id, while its lock is held, goes unregistered"
    );

    // Dropped rather than released: as a death, the session ends and the row stays.
    drop(live);
    let mut dead = Vec::new();
    for _ in 0..50 {
        dead = db
            .store
            .dead_workers()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        if !dead.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        dead,
        std::slice::from_ref(&id),
        "the ended session freed the lock"
    );
    let forgotten = db.store.forget_workers(&dead).await;
    assert_eq!(forgotten.unwrap_or_else(|e| panic!("{e}")), 1);
    assert_eq!(db.count(WORKERS).await, 0);

    // Released: the worker removes its own registration through its session.
    let again = db
        .store
        .hold_liveness(&id)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("registered again"));
    assert_eq!(db.count(WORKERS).await, 1);
    again.release(Duration::from_secs(5)).await;
    assert_eq!(db.count(WORKERS).await, 0, "a clean stop forgets itself");
    db.finish().await;
}
