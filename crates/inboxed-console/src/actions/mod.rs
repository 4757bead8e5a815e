//! The operators' actions: retry or discard dead letters ([`letters`]), replay rows (a
//! re-drive for done ones) and release a parked aggregate ([`replay`]). Each is a GET that
//! shows what it will touch, counted by the library's own dry run, and a POST that does it:
//! from an operator only, with the form's CSRF token and a reason for the audit record. The
//! form carries the ids the confirmation counted, and the POST touches those only: it recounts
//! them and, when some no longer match (a worker finished a row, another operator acted), shows
//! the confirmation again (409) instead of acting, so that nothing is changed that was not
//! confirmed. The change and its audit record (who, when, why, the filter) commit together.

pub(crate) mod letters;
pub(crate) mod outbox;
pub(crate) mod replay;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use crate::Console;
use crate::access::{Role, Viewer, cross_site};
use crate::layout::failure;

/// The most rows or letters one action touches; a confirmation over more asks to narrow the
/// filter (or, for dead letters, to run it again for the rest).
pub(crate) const MOST_ACTED: usize = inboxed_core::observe::MOST_LETTERS_ACTED as usize;

/// The longest reason an action keeps in its audit record: a sentence or a ticket's link,
/// not a document (the audit trail lists them all).
pub(crate) const LONGEST_WHY: usize = 1_000;

/// The fields of a confirmation's form besides the filters.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Confirmed {
    #[serde(default)]
    action: String,
    #[serde(default)]
    csrf: String,
    /// The ids the confirmation counted, comma-separated.
    #[serde(default)]
    ids: String,
    /// Why, for the audit record (not `reason`: that is a dead-letter filter).
    #[serde(default)]
    why: String,
}

impl Confirmed {
    /// The confirmed ids, or `None` when the field does not read as ids.
    fn ids(&self) -> Option<Vec<i64>> {
        self.ids
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.trim().parse().ok())
            .collect()
    }
}

/// The ids a form carries, comma-separated.
fn joined(ids: &[i64]) -> String {
    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
}

/// Refuses a viewer who may not act, or a POST without its form's token.
fn refused<S>(
    console: &Console<S>,
    viewer: &Viewer,
    post: Option<(&HeaderMap, &Confirmed)>,
) -> Option<Response> {
    if viewer.role < Role::Operator {
        return Some(failure(
            &console.config,
            viewer,
            StatusCode::FORBIDDEN,
            "Refused: this user is read-only; acting needs the operator role.",
        ));
    }
    let (headers, form) = post?;
    if cross_site(headers) || !console.csrf.verify(viewer, &form.csrf) {
        return Some(failure(
            &console.config,
            viewer,
            StatusCode::FORBIDDEN,
            "Refused: the form's token is missing or stale (or the request came from another \
             site). Open the confirmation again.",
        ));
    }
    None
}

/// A POSTed confirmation: its filters, its own fields and the ids it confirmed (the form read
/// twice); or the refusal of a viewer who may not act or a form without its token, or 400 for
/// a form that does not read (never read as "no filter": that would mean everything).
fn posted<S, F: serde::de::DeserializeOwned>(
    console: &Console<S>,
    viewer: &Viewer,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(F, Confirmed, Vec<i64>), Box<Response>> {
    let bad = |what: &str| {
        Box::new(failure(
            &console.config,
            viewer,
            StatusCode::BAD_REQUEST,
            &format!("the form does not read: {what}"),
        ))
    };
    let form: Confirmed = serde_urlencoded::from_bytes(body).map_err(|e| bad(&e.to_string()))?;
    if let Some(refusal) = refused(console, viewer, Some((headers, &form))) {
        return Err(Box::new(refusal));
    }
    let filters = serde_urlencoded::from_bytes(body).map_err(|e| bad(&e.to_string()))?;
    let ids = form.ids().ok_or_else(|| bad("the confirmed ids"))?;
    if ids.is_empty() || ids.len() > MOST_ACTED || form.why.trim().is_empty() {
        return Err(bad("the confirmed ids and a reason are needed"));
    }
    if form.why.chars().count() > LONGEST_WHY {
        return Err(bad(&format!(
            "the reason is kept in the audit trail, {LONGEST_WHY} characters at most"
        )));
    }
    Ok((filters, form, ids))
}

/// A confirmation's status: 409 when shown again because the selection changed.
fn shown(changed: Option<usize>) -> StatusCode {
    if changed.is_some() {
        StatusCode::CONFLICT
    } else {
        StatusCode::OK
    }
}

/// The warning of a confirmation shown again: how many of the confirmed still match.
fn changed_note(changed: Option<usize>) -> Markup {
    html! {
        @if let Some(still) = changed {
            p.warn { "The selection changed since it was confirmed: " (still)
                " of the confirmed still match. Here is what matches now; confirm again." }
        }
    }
}

/// The form's last part: the confirmed ids, the token, the reason, the button.
fn form_tail(console_token: &str, ids: &[i64], button: &str) -> Markup {
    html! {
        input type="hidden" name="ids" value=(joined(ids));
        input type="hidden" name="csrf" value=(console_token);
        label { "Why (kept in the audit trail)"
            textarea name="why" required maxlength=(LONGEST_WHY) {} }
        button.danger type="submit" { (button) }
    }
}

/// The links to the confirmations of a retry and a discard at `path` of what `query` selects;
/// for operators only (a read-only user sees why there is none).
pub(crate) fn act_links(
    prefix: &str,
    viewer: &Viewer,
    path: &str,
    query: &str,
    retry: &str,
    discard: &str,
) -> Markup {
    if viewer.role < Role::Operator {
        return html! { p.note { "Read-only: retrying and discarding need the operator role." } };
    }
    let sep = if query.is_empty() { "" } else { "&" };
    html! {
        div.actions {
            a href={ (prefix) (path) "?action=retry" (sep) (query) } { (retry) }
            a.danger href={ (prefix) (path) "?action=discard" (sep) (query) } { (discard) }
        }
    }
}
