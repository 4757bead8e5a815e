//! Access, and the actions on dead letters and rows.

use crate::common::{OPS, VIEWER, get, get_as, serve, store_with_dead_letters};
use crate::{console, count, csrf, field, post_as};
use inboxed_console::{Console, ConsoleConfig, ConsoleUser, Role};

const LETTERS: &str = "SELECT count(*) FROM inboxed_dead_letters";
const PENDING: &str = "SELECT count(*) FROM inboxed_inbox_messages WHERE status = 'pending'";

#[tokio::test]
async fn nobody_gets_in_without_credentials_and_a_read_only_user_cannot_act() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    let base = console(&store).await;

    let answer = reqwest::get(format!("{base}/")).await.unwrap();
    assert_eq!(answer.status().as_u16(), 401);
    assert!(
        answer.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .starts_with("Basic")
    );
    assert!(
        answer.headers().contains_key("content-security-policy"),
        "a refusal is hardened too"
    );
    assert_eq!(get(&format!("{base}/dead-letters")).await.0, 401);
    assert_eq!(
        get_as(&format!("{base}/"), (OPS.0, "0123456789abcdef-bad"))
            .await
            .0,
        401
    );
    assert_eq!(
        get_as(&format!("{base}/"), (OPS.0, VIEWER.1)).await.0,
        401,
        "a token signs in only its own user"
    );
    let bearer = reqwest::Client::new()
        .get(format!("{base}/dead-letters"))
        .bearer_auth(VIEWER.1)
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status().as_u16(), 200);
    let csp = bearer.headers()["content-security-policy"]
        .to_str()
        .unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    let list = bearer.text().await.unwrap();
    assert!(list.contains("Read-only"), "{list}");
    assert!(
        !list.contains("/dead-letters/act"),
        "no action offered: {list}"
    );

    let (status, page) = get_as(
        &format!("{base}/dead-letters/act?action=discard&consumer=billing"),
        VIEWER,
    )
    .await;
    assert_eq!(status, 403, "{page}");
    // Even with an operator's token for the form, a read-only user is refused.
    let (_, confirm) = get_as(
        &format!("{base}/dead-letters/act?action=discard&consumer=billing"),
        OPS,
    )
    .await;
    let fields = [
        ("action", "discard"),
        ("consumer", "billing"),
        ("ids", &field(&confirm, "ids")),
        ("why", "cleanup"),
        ("csrf", &csrf(&confirm)),
    ];
    let url = format!("{base}/dead-letters/act");
    assert_eq!(post_as(&url, VIEWER, &fields, &[]).await.0, 403);
    assert_eq!(count(&store, LETTERS).await, 2, "nothing discarded");
    assert_eq!(
        get_as(
            &format!("{base}/rows/replay?consumer=billing&status=dead"),
            VIEWER
        )
        .await
        .0,
        403
    );
}

#[tokio::test]
async fn an_action_needs_its_token_its_site_and_the_count_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    let base = console(&store).await;
    let (status, confirm) = get_as(
        &format!("{base}/dead-letters/act?action=discard&consumer=billing"),
        OPS,
    )
    .await;
    assert_eq!(status, 200, "{confirm}");
    assert!(
        confirm.contains("<strong>2</strong> dead letter(s) match"),
        "{confirm}"
    );
    let token: &'static str = Box::leak(csrf(&confirm).into_boxed_str());
    let both: &'static str = Box::leak(field(&confirm, "ids").into_boxed_str());
    let url = format!("{base}/dead-letters/act");
    let form = |token: &'static str, ids: &'static str| {
        vec![
            ("action", "discard"),
            ("consumer", "billing"),
            ("ids", ids),
            ("why", "test traffic"),
            ("csrf", token),
        ]
    };

    assert_eq!(post_as(&url, OPS, &form("", both), &[]).await.0, 403);
    assert_eq!(
        post_as(&url, OPS, &form("AAAA", both), &[]).await.0,
        403,
        "a forged token"
    );
    assert_eq!(
        post_as(
            &url,
            OPS,
            &form(token, both),
            &[("sec-fetch-site", "cross-site")]
        )
        .await
        .0,
        403,
        "a form submitted from another site"
    );
    let mut malformed = form(token, both);
    malformed.push(("id", "abc"));
    assert_eq!(
        post_as(&url, OPS, &malformed, &[]).await.0,
        400,
        "a filter that does not read is never read as no filter"
    );
    let mut long = form(token, both);
    let essay = "x".repeat(1001);
    long.retain(|(k, _)| *k != "why");
    long.push(("why", Box::leak(essay.into_boxed_str())));
    assert_eq!(
        post_as(&url, OPS, &long, &[]).await.0,
        400,
        "a reason longer than the audit trail keeps"
    );
    let (status, again) = post_as(&url, OPS, &form(token, "999999"), &[]).await;
    assert_eq!(
        status, 409,
        "an id confirmed that no longer matches: {again}"
    );
    assert!(again.contains("changed"), "{again}");
    assert_eq!(count(&store, LETTERS).await, 2, "nothing discarded yet");

    let (status, done) = post_as(&url, OPS, &form(token, both), &[]).await;
    assert_eq!(status, 200, "{done}");
    assert!(done.contains("Discarded <strong>2</strong>"), "{done}");
    assert_eq!(count(&store, LETTERS).await, 0);
    let (_, audit) = get_as(&format!("{base}/audit"), VIEWER).await;
    assert!(
        audit.contains("letter discard") && audit.contains("test traffic"),
        "{audit}"
    );
    assert!(audit.contains("<td>ops</td>"), "who: {audit}");
}

#[tokio::test]
async fn an_operator_retries_letters_into_the_inbox_and_replays_a_dead_row() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    let base = console(&store).await;

    let (_, confirm) = get_as(&format!("{base}/dead-letters/act?action=retry"), OPS).await;
    assert!(
        confirm.contains("<strong>2</strong> will be stored"),
        "{confirm}"
    );
    let token = csrf(&confirm);
    let fields = [
        ("action", "retry"),
        ("ids", &field(&confirm, "ids")),
        ("why", "fixed the charge parser"),
        ("csrf", &token),
    ];
    let (status, done) = post_as(&format!("{base}/dead-letters/act"), OPS, &fields, &[]).await;
    assert_eq!(status, 200, "{done}");
    assert!(done.contains("Retried <strong>2</strong>"), "{done}");
    assert_eq!(count(&store, LETTERS).await, 0);
    assert_eq!(count(&store, PENDING).await, 2, "both wait for workers");

    let (_, rows) = get_as(&format!("{base}/rows?consumer=billing"), VIEWER).await;
    assert!(
        rows.contains("charge-7") && rows.contains("2 shown"),
        "{rows}"
    );
    assert!(!rows.contains("<script>alert"), "{rows}");

    sqlx::query("UPDATE inboxed_inbox_messages SET status = 'dead' WHERE message_id = 'charge-7'")
        .execute(store.pool())
        .await
        .unwrap();
    let (status, confirm) = get_as(
        &format!("{base}/rows/replay?consumer=billing&status=dead"),
        OPS,
    )
    .await;
    assert_eq!(status, 200, "{confirm}");
    assert!(confirm.contains("<strong>1</strong> row(s)"), "{confirm}");
    let token = csrf(&confirm);
    let charge7 = field(&confirm, "ids");
    // Before the POST, charge-7 is replayed by someone else and the other row dies: the count
    // is still one, but not the row confirmed.
    let swap = |dead: &'static str| {
        let pool = store.pool().clone();
        async move {
            sqlx::query(
                "UPDATE inboxed_inbox_messages \
                 SET status = CASE WHEN message_id = ?1 THEN 'dead' ELSE 'pending' END",
            )
            .bind(dead)
            .execute(&pool)
            .await
            .unwrap();
        }
    };
    swap("<script>alert(1)</script>").await;
    let fields = [
        ("consumer", "billing"),
        ("status", "dead"),
        ("ids", &charge7),
        ("why", "after the fix"),
        ("csrf", &token),
    ];
    let url = format!("{base}/rows/replay");
    let (status, again) = post_as(&url, OPS, &fields, &[]).await;
    assert_eq!(
        status, 409,
        "a row nobody confirmed is not replayed: {again}"
    );
    assert_eq!(count(&store, PENDING).await, 1, "the other row stays dead");
    swap("charge-7").await;
    let (status, done) = post_as(&url, OPS, &fields, &[]).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        count(&store, PENDING).await,
        2,
        "the dead row is pending again"
    );

    let (_, audit) = get_as(&format!("{base}/audit?consumer=billing"), OPS).await;
    assert!(
        audit.contains("replay") && audit.contains("letter retry"),
        "{audit}"
    );
}

#[tokio::test]
async fn an_open_console_answers_only_its_own_names_and_never_another_sites_requests() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    let mut config = ConsoleConfig::default();
    config.anonymous = Some(Role::ReadOnly);
    config.hosts = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
    let base = serve(Console::new(store.clone()).with_config(config).router()).await;
    let client = reqwest::Client::new();
    let status = |host: Option<&'static str>, site: Option<(&'static str, &'static str)>| {
        let mut request = client.get(format!("{base}/dead-letters"));
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some((site, mode)) = site {
            request = request
                .header("sec-fetch-site", site)
                .header("sec-fetch-mode", mode);
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status(None, None).await, 200, "its own address");
    assert_eq!(status(Some("localhost:9464"), None).await, 200);
    assert_eq!(
        status(Some("rebound.example:9464"), None).await,
        421,
        "a name rebound to loopback (DNS rebinding)"
    );
    assert_eq!(
        status(None, Some(("cross-site", "no-cors"))).await,
        403,
        "an image or script of another site"
    );
    assert_eq!(
        status(None, Some(("cross-site", "navigate"))).await,
        200,
        "a link from another site (an alert's) is followed"
    );
    let open = reqwest::get(format!("{base}/")).await.unwrap();
    assert_eq!(
        open.status().as_u16(),
        200,
        "without credentials: the anonymous role"
    );

    assert!(
        ConsoleUser::with_token("anonymous", Role::Operator, OPS.1).is_err(),
        "no user takes the name of requests without credentials"
    );
    assert!(ConsoleUser::with_token("short", Role::Operator, "0123456789").is_err());
}

#[tokio::test]
async fn a_retry_into_the_inbox_stops_at_what_one_request_finishes_and_a_discard_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_dead_letters(&dir).await;
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2001) \
         INSERT INTO inboxed_dead_letters \
             (consumer_name, message_id, payload, payload_hash, reason, error, attempts) \
         SELECT 'bulk', 'b-' || i, CAST('{}' AS BLOB), NULL, 'permanent', 'refused', 1 FROM n",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let base = console(&store).await;
    let (status, retry) = get_as(
        &format!("{base}/dead-letters/act?action=retry&consumer=bulk"),
        OPS,
    )
    .await;
    assert_eq!(status, 200, "{retry}");
    assert!(
        retry.contains("<strong>2000</strong> dead letter(s) match (the most one action"),
        "{retry}"
    );
    let (_, discard) = get_as(
        &format!("{base}/dead-letters/act?action=discard&consumer=bulk"),
        OPS,
    )
    .await;
    assert!(
        discard.contains("<strong>2001</strong> dead letter(s) match."),
        "{discard}"
    );
}
