//! The page around every view: the navigation, a stylesheet small enough to inline, readable at
//! a phone's width (tables scroll sideways rather than squeeze), and the times every view shows.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use axum::http::StatusCode;
use maud::{DOCTYPE, Markup, html};

use crate::ConsoleConfig;
use crate::access::Viewer;

/// A whole page titled `title`, with `body`, for `viewer`; links start at `config`'s prefix,
/// and a tenant's console names its tenant beside a link to the tenants' index. A page with
/// `refresh` reloads its `main` every few seconds while its tab is shown.
pub(crate) fn page(
    config: &ConsoleConfig,
    viewer: &Viewer,
    title: &str,
    refresh: bool,
    body: Markup,
) -> Markup {
    let prefix = config.prefix.as_str();
    let nav = html! {
        @if let Some(tenant) = &config.tenant {
            a href=(home(&tenant.index)) { "Tenants" }
            span.tenant { (tenant.name) }
        }
        a href=(home(prefix)) { "Overview" }
        a href={ (prefix) "/rows" } { "Rows" }
        a href={ (prefix) "/dead-letters" } { "Dead letters" }
        a href={ (prefix) "/outbox" } { "Outbox" }
        a href={ (prefix) "/audit" } { "Audit" }
    };
    document(prefix, viewer, title, refresh, &nav, body)
}

/// The HTML around `body`: `nav`'s links and who is signed in above it, the script at
/// `prefix`'s assets.
pub(crate) fn document(
    prefix: &str,
    viewer: &Viewer,
    title: &str,
    refresh: bool,
    nav: &Markup,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · inboxed" }
                style { (STYLE) }
                script src={ (prefix) "/assets/console.js" } defer {}
            }
            body data-refresh=[refresh.then_some("5000")] {
                nav {
                    (nav)
                    span.who { (viewer.name) " · " (viewer.role.as_str()) }
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

/// A page saying what went wrong; its status is the caller's.
pub(crate) fn failure(
    config: &ConsoleConfig,
    viewer: &Viewer,
    status: StatusCode,
    what: &str,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        status,
        page(
            config,
            viewer,
            "Not available",
            false,
            html! { p.failure { (what) } },
        ),
    )
        .into_response()
}

/// The 503 page for a read (or change) of `what` that failed with `err`.
pub(crate) fn unavailable(
    config: &ConsoleConfig,
    viewer: &Viewer,
    what: &str,
    err: &dyn std::fmt::Display,
) -> axum::response::Response {
    failure(
        config,
        viewer,
        StatusCode::SERVICE_UNAVAILABLE,
        &format!("{what} could not be read or changed: {err}"),
    )
}

/// What a read of one `what` by `id` found, or the page saying it is not there (404) or
/// could not be read (503).
pub(crate) fn found<T>(
    config: &ConsoleConfig,
    viewer: &Viewer,
    what: &str,
    id: i64,
    read: Result<Option<T>, inboxed_core::BoxError>,
) -> Result<T, Box<axum::response::Response>> {
    match read {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(Box::new(failure(
            config,
            viewer,
            StatusCode::NOT_FOUND,
            &format!("no {what} {id}"),
        ))),
        Err(e) => Err(Box::new(unavailable(
            config,
            viewer,
            &format!("the {what}"),
            &e,
        ))),
    }
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
    format!("{} ago", span(secs))
}

/// How long until `t`: "in 20s", or "due" once it has passed.
pub(crate) fn until(t: Option<SystemTime>) -> String {
    let Some(t) = t else {
        return "-".to_owned();
    };
    match t.duration_since(SystemTime::now()) {
        Ok(ahead) if ahead.as_secs() > 0 => format!("in {}", span(ahead.as_secs())),
        _ => "due".to_owned(),
    }
}

/// Seconds in the largest whole unit: 42s, 5m, 3h, 2d.
fn span(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// A size in bytes in the largest unit that keeps it at one or more (`512 B`, `3.4 MiB`).
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 0; color: #1b1b1b; }
nav { display: flex; gap: 1rem; padding: .75rem 1rem; background: #24324a; }
nav a { color: #fff; text-decoration: none; }
nav .tenant { color: #fff; font-weight: 600; }
nav .who { color: #c8d3e6; margin-left: auto; font-size: .9rem; }
nav { flex-wrap: wrap; }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; margin: .5rem 0 1rem; }
.actions a, button { padding: .35rem .7rem; border: 1px solid #24324a; border-radius: 4px;
  background: #fff; color: #24324a; text-decoration: none; font: inherit; cursor: pointer; }
button.danger, .actions a.danger { border-color: #a33; color: #a33; }
.confirm { border: 2px solid #24324a; padding: 1rem; max-width: 40rem; }
.confirm form { flex-direction: column; align-items: flex-start; }
label { display: block; width: 100%; }
.note { color: #555; font-size: .9rem; }
textarea { width: 100%; max-width: 36rem; min-height: 3rem; }
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

/// The payload as JSON when it parses, hex otherwise, cut at the configured size; or why it is
/// not shown.
pub(crate) fn payload(config: &ConsoleConfig, viewer: &Viewer, bytes: &[u8]) -> Markup {
    if !config.show_payloads {
        return html! { p { "Hidden (the console's show_payloads is off)." } };
    }
    if !viewer.payloads {
        return html! { p { "Hidden (this user may not see payloads)." } };
    }
    if bytes.is_empty() {
        return html! { p { "None kept (empty, or redacted)." } };
    }
    let shown = &bytes[..bytes.len().min(config.payload_bytes)];
    let cut = shown.len() < bytes.len();
    let text = match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(json) if !cut => serde_json::to_string_pretty(&json).unwrap_or_default(),
        _ => hex(shown),
    };
    html! {
        pre.payload { (text) }
        @if cut { p { "The first " (shown.len()) " of " (bytes.len()) " bytes." } }
    }
}

/// `bytes` as hex, 32 to a line.
fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(if i % 32 == 0 { '\n' } else { ' ' });
        }
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn sizes_read_in_the_largest_unit_that_fits() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(5 * 1024 * 1024 + 512 * 1024), "5.5 MiB");
        assert_eq!(bytes(u64::MAX), "16777216.0 TiB");
    }
}
