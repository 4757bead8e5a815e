//! The console's pages against a real SQLite database filled through the real processor: what
//! each page shows, that nothing a producer sent is ever rendered as markup, and that the
//! links work under the prefix a user nests the router at.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use common::{OPS, get, get_as, serve, store_with_dead_letters};
use inboxed_console::{Console, ConsoleConfig, ConsoleUser, Role};

#[tokio::test]
async fn the_pages_show_the_dead_letters_and_never_render_what_a_producer_sent() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    let mut config = ConsoleConfig::default();
    config.anonymous = Some(Role::ReadOnly);
    config.consumers = vec!["quiet".to_owned(), "Not A Name!".to_owned()];
    let base = serve(Console::new(store.clone()).with_config(config).router()).await;

    let (status, overview) = get(&format!("{base}/")).await;
    assert_eq!(status, 200, "{overview}");
    assert!(
        overview.contains("None open"),
        "no kill switch open yet: {overview}"
    );
    // Billing's switch opened a minute ago and probes in 30 s: the page says it is paused.
    let now = std::time::SystemTime::now();
    let opened = inboxed_core::kill_switch::Opened {
        at: now - std::time::Duration::from_secs(61),
        next_probe: now + std::time::Duration::from_secs(30),
    };
    let billing = inboxed_core::ConsumerName::new("billing").unwrap();
    inboxed_core::Store::report_switch(&store, &billing, "one", Some(opened))
        .await
        .unwrap();
    let (_, overview) = get(&format!("{base}/")).await;
    let switches = &overview[overview.find("Kill switches").expect("the section")..];
    let switches = &switches[..switches.find("Processed keys").expect("the next section")];
    assert!(switches.contains("<td>billing</td>"), "{switches}");
    assert!(switches.contains("1 process"), "{switches}");
    assert!(switches.contains("1m ago"), "{switches}");
    assert!(
        switches.contains("in 29s") || switches.contains("in 30s"),
        "the probe in about 30 s: {switches}"
    );
    assert!(overview.contains("billing"), "{overview}");
    assert!(
        overview.contains("<td>2</td>"),
        "two dead letters counted: {overview}"
    );
    // Processed keys: billing (it has dead letters) and the configured quiet consumer; a
    // configured name that is not one says so in its row instead of failing the page.
    let keys = &overview[overview.find("Processed keys").expect("the section")..];
    assert!(keys.contains("<td>billing</td>"), "{keys}");
    assert!(keys.contains("<td>quiet</td>"), "{keys}");
    assert!(keys.contains("unreadable"), "{keys}");
    assert!(
        keys.contains("not known here"),
        "no counters at hand: {keys}"
    );

    let (status, list) = get(&format!("{base}/dead-letters?consumer=billing")).await;
    assert_eq!(status, 200);
    assert!(list.contains("charge-7"), "{list}");
    assert!(
        list.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{list}"
    );
    assert!(
        !list.contains("<script>alert"),
        "a message id rendered as markup: {list}"
    );
    assert!(
        !list.contains("<b>not</b>"),
        "an error rendered as markup: {list}"
    );

    let (_, none) = get(&format!("{base}/dead-letters?consumer=nobody")).await;
    assert!(none.contains("0 shown"), "{none}");
    for (search, shown) in [
        ("json=cents%3D250", "1 shown"),
        ("json=cents%3D251", "0 shown"),
        ("payload=onerror", "1 shown"),
        ("payload=nowhere", "0 shown"),
    ] {
        let (_, found) = get(&format!("{base}/dead-letters?{search}")).await;
        assert!(found.contains(shown), "{search}: {found}");
    }
    assert_eq!(
        get(&format!("{base}/dead-letters?json=cents")).await.0,
        400,
        "a JSON search without a value"
    );

    let id: i64 =
        sqlx::query_scalar("SELECT id FROM inboxed_dead_letters WHERE message_id = 'charge-7'")
            .fetch_one(store.pool())
            .await
            .unwrap();
    let (status, one) = get(&format!("{base}/dead-letters/{id}")).await;
    assert_eq!(status, 200, "{one}");
    assert!(
        one.contains("Hidden"),
        "payloads are hidden by default: {one}"
    );
    assert!(!one.contains("cents"), "{one}");
    assert_eq!(get(&format!("{base}/dead-letters/999999")).await.0, 404);
}

#[tokio::test]
async fn payloads_show_as_json_or_hex_when_allowed_and_links_keep_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    let mut config = ConsoleConfig::default();
    config.prefix = "/ops/inboxed".to_owned();
    config.show_payloads = true;
    config.users = vec![
        ConsoleUser::with_token(OPS.0, Role::Operator, OPS.1)
            .unwrap()
            .with_payloads(true),
    ];
    let console = Console::new(store.clone()).with_config(config).router();
    let base = serve(axum::Router::new().nest("/ops/inboxed", console)).await;

    let (status, overview) = get_as(&format!("{base}/ops/inboxed"), OPS).await;
    assert_eq!(status, 200, "{overview}");
    assert!(
        overview
            .contains(r#"href="/ops/inboxed/dead-letters?consumer=billing&amp;reason=permanent""#),
        "{overview}"
    );
    let ids: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, message_id FROM inboxed_dead_letters ORDER BY id")
            .fetch_all(store.pool())
            .await
            .unwrap();
    let (_, markup) = get_as(
        &format!("{base}/ops/inboxed/dead-letters/{}", ids[0].0),
        OPS,
    )
    .await;
    assert!(markup.contains("3c 69 6d 67"), "not JSON: hex ({markup})");
    assert!(!markup.contains("<img"), "{markup}");
    let (_, json) = get_as(
        &format!("{base}/ops/inboxed/dead-letters/{}", ids[1].0),
        OPS,
    )
    .await;
    assert!(
        json.contains("&quot;cents&quot;: 250"),
        "pretty JSON: {json}"
    );
}
