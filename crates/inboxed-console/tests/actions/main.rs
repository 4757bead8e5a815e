//! Who gets in, and what an operator's actions do, against a real SQLite database: nobody
//! without credentials, a read-only user refused every action, an action refused without its
//! form's token, from another site, or when the selection changed since its confirmation; an
//! operator's retry, replay and discard changing exactly what was confirmed, each audited.
//! The dead letters' and rows' actions in `letters`, the outbox's in `outbox`.

#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
mod letters;
mod outbox;
mod tenants;

use common::{OPS, VIEWER, serve};
use inboxed_console::{Console, ConsoleConfig, ConsoleUser, Role};
use inboxed_sqlite::SqliteStore;

/// The console with an operator and a read-only user, and nobody else.
pub(crate) async fn console(store: &SqliteStore) -> String {
    let mut config = ConsoleConfig::default();
    config.users = vec![
        ConsoleUser::with_token(OPS.0, Role::Operator, OPS.1).unwrap(),
        ConsoleUser::with_token(VIEWER.0, Role::ReadOnly, VIEWER.1).unwrap(),
    ];
    serve(Console::new(store.clone()).with_config(config).router()).await
}

/// A form POST as `user`, with extra headers; status and body.
pub(crate) async fn post_as(
    url: &str,
    user: (&str, &str),
    fields: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut body = form_urlencoded::Serializer::new(String::new());
    for (k, v) in fields {
        body.append_pair(k, v);
    }
    let mut request = reqwest::Client::new()
        .post(url)
        .basic_auth(user.0, Some(user.1))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.finish());
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let answer = request.send().await.unwrap();
    (answer.status().as_u16(), answer.text().await.unwrap())
}

/// The value of the hidden field `name` of a confirmation page's form.
pub(crate) fn field(page: &str, name: &str) -> String {
    let marker = format!(r#"name="{name}" value=""#);
    let start = page.find(&marker).expect("a form with the field") + marker.len();
    page[start..start + page[start..].find('"').unwrap()].to_owned()
}

/// The CSRF token a confirmation page's form carries.
pub(crate) fn csrf(page: &str) -> String {
    field(page, "csrf")
}

pub(crate) async fn count(store: &SqliteStore, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql)
        .fetch_one(store.pool())
        .await
        .unwrap()
}
