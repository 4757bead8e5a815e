//! A console per tenant's database ([`TenantConsoles`]): the index reads every tenant side by
//! side (one that cannot be read says so without hiding the others), each tenant's pages and
//! actions reach its own database only, and a form of one tenant does not act on another.

use crate::common::{OPS, Refuses, VIEWER, get, get_as, serve, store_with_dead_letters};
use crate::{count, csrf, field, post_as};
use inboxed_console::{ConsoleConfig, ConsoleUser, Role, TenantConsoles, TenantError};
use inboxed_core::{ConsumerName, Envelope, MessageId, Processor};
use inboxed_sqlite::SqliteStore;

const LETTERS: &str = "SELECT count(*) FROM inboxed_dead_letters";

#[tokio::test]
async fn each_tenants_console_reads_and_changes_its_own_database() {
    let (dir_a, dir_b, dir_c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let a = store_with_dead_letters(&dir_a).await;
    let b = store_with_dead_letters(&dir_b).await;
    let shipping = Processor::new(b.clone(), ConsumerName::new("shipping").unwrap(), Refuses);
    let parcel = Envelope::new(MessageId::new("parcel-1").unwrap(), b"{}".to_vec());
    shipping.process(&parcel, Some(1)).await.unwrap();
    // Never migrated: its reads fail.
    let c = SqliteStore::open(dir_c.path().join("c.db")).await.unwrap();

    let mut config = ConsoleConfig::default();
    config.prefix = "/ops".to_owned();
    config.users = vec![
        ConsoleUser::with_token(OPS.0, Role::Operator, OPS.1).unwrap(),
        ConsoleUser::with_token(VIEWER.0, Role::ReadOnly, VIEWER.1).unwrap(),
    ];
    let consoles = TenantConsoles::new(config)
        .tenant("a", a.clone())
        .unwrap()
        .tenant("b", b.clone())
        .unwrap()
        .tenant("c", c)
        .unwrap();
    assert!(matches!(
        consoles.clone().tenant("a", b.clone()),
        Err(TenantError::Twice(_))
    ));
    assert!(matches!(
        consoles.clone().tenant("../a", b.clone()),
        Err(TenantError::Name(_))
    ));
    let base = serve(axum::Router::new().nest("/ops", consoles.router())).await;

    assert_eq!(
        get(&format!("{base}/ops")).await.0,
        401,
        "the index asks too"
    );
    assert_eq!(get(&format!("{base}/ops/t/a")).await.0, 401);
    let (status, index) = get_as(&format!("{base}/ops"), VIEWER).await;
    assert_eq!(status, 200, "{index}");
    let row = |tenant: &str| {
        let start = index
            .find(&format!(r#"<a href="/ops/t/{tenant}">"#))
            .unwrap_or_else(|| panic!("a row for {tenant}: {index}"));
        index[start..start + index[start..].find("</tr>").unwrap()].to_owned()
    };
    assert!(
        row("a").contains(r#"<a href="/ops/t/a/dead-letters">2</a>"#),
        "{}",
        row("a")
    );
    assert!(
        row("b").contains(r#"<a href="/ops/t/b/dead-letters">3</a>"#),
        "{}",
        row("b")
    );
    assert!(row("c").contains("not read"), "{}", row("c"));

    let (status, letters) = get_as(&format!("{base}/ops/t/b/dead-letters"), VIEWER).await;
    assert_eq!(status, 200, "{letters}");
    assert!(letters.contains("shipping"), "{letters}");
    assert!(
        letters.contains(r#"<a href="/ops">Tenants</a>"#),
        "{letters}"
    );
    assert!(
        letters.contains(r#"<span class="tenant">b</span>"#),
        "{letters}"
    );
    assert!(
        letters.contains(r#"href="/ops/t/b/dead-letters/"#),
        "{letters}"
    );
    let (_, letters) = get_as(&format!("{base}/ops/t/a/dead-letters"), VIEWER).await;
    assert!(!letters.contains("shipping"), "{letters}");
    assert_eq!(get_as(&format!("{base}/ops/t/d"), VIEWER).await.0, 404);

    // Discard b's dead letters: b's form, posted to a's console, acts on nothing.
    let (status, confirm) = get_as(
        &format!("{base}/ops/t/b/dead-letters/act?action=discard"),
        OPS,
    )
    .await;
    assert_eq!(status, 200, "{confirm}");
    let ids = field(&confirm, "ids");
    let token = csrf(&confirm);
    let form = [
        ("action", "discard"),
        ("ids", ids.as_str()),
        ("why", "b's test traffic"),
        ("csrf", token.as_str()),
    ];
    let (status, _) = post_as(&format!("{base}/ops/t/a/dead-letters/act"), OPS, &form, &[]).await;
    assert_eq!(status, 403, "a form of b refused by a");
    assert_eq!(count(&a, LETTERS).await, 2);
    let (status, done) =
        post_as(&format!("{base}/ops/t/b/dead-letters/act"), OPS, &form, &[]).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!((count(&a, LETTERS).await, count(&b, LETTERS).await), (2, 0));
}
