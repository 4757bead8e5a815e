//! The page around every view: the navigation, a stylesheet small enough to inline, readable at
//! a phone's width (tables scroll sideways rather than squeeze), and the times every view shows.

use std::time::{Duration, SystemTime};

use axum::http::StatusCode;
use maud::{DOCTYPE, Markup, html};

/// A whole page titled `title`, with `body`; links start at `prefix`.
pub(crate) fn page(prefix: &str, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · inboxed" }
                style { (STYLE) }
            }
            body {
                nav {
                    a href=(home(prefix)) { "Overview" }
                    a href={ (prefix) "/dead-letters" } { "Dead letters" }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The overview's path: the prefix itself (a router nested at `/x` answers `/x`, not `/x/`),
/// or `/` at the root.
pub(crate) fn home(prefix: &str) -> &str {
    if prefix.is_empty() { "/" } else { prefix }
}

/// A page saying what could not be read; its status is the caller's.
pub(crate) fn failure(prefix: &str, status: StatusCode, what: &str) -> (StatusCode, Markup) {
    (
        status,
        page(prefix, "Not available", html! { p.failure { (what) } }),
    )
}

/// The 503 page for a read of `what` that failed with `err`.
pub(crate) fn unavailable(
    prefix: &str,
    what: &str,
    err: &dyn std::fmt::Display,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    failure(
        prefix,
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("{what} could not be read: {err}"),
    )
    .into_response()
}

/// How long ago `t` was, in the largest unit that fits (`42s`, `5m`, `3h`, `2d`), or `-`.
pub(crate) fn ago(t: Option<SystemTime>) -> String {
    let Some(t) = t else {
        return "-".to_owned();
    };
    let secs = SystemTime::now()
        .duration_since(t)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86_400 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1b1b; }
nav { display: flex; gap: 1rem; padding: .75rem 1rem; background: #24324a; }
nav a { color: #fff; text-decoration: none; }
main { padding: 1rem; }
h1 { font-size: 1.3rem; margin-top: 0; }
h2 { font-size: 1.1rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; min-width: 100%; }
th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid #ddd; white-space: nowrap; }
td.wrap { white-space: normal; word-break: break-word; min-width: 16rem; }
.warn { color: #a33; font-weight: 600; }
.failure { color: #a33; }
form { display: flex; flex-wrap: wrap; gap: .5rem; margin-bottom: 1rem; }
input { padding: .3rem; }
pre { background: #f4f4f4; padding: .75rem; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; }
dt { font-weight: 600; }
dd { margin: 0; word-break: break-word; }
";
