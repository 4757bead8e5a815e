//! Retry dead outbox rows (published again under the same id by the next relay pass) or
//! discard them: one, or all that match the list's destination, ordering key and message id,
//! through [`OutboxStore::act_on_dead`](inboxed_core::outbox::store::OutboxStore::act_on_dead),
//! the operation `inboxed outbox retry|discard` runs.

use std::sync::Arc;

use axum::Extension;
use axum::extract::{Query, RawForm, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use inboxed_core::outbox::{DeadAction, DeadParams};
use maud::html;

use super::{Confirmed, MOST_ACTED, changed_note, form_tail, posted, refused, shown};
use crate::access::Viewer;
use crate::forms::{Filters as _, OutboxFilters};
use crate::layout::{failure, page, unavailable};
use crate::{Console, ConsoleStore};

fn dead_action(name: &str) -> Option<DeadAction> {
    match name {
        "retry" => Some(DeadAction::Retry),
        "discard" => Some(DeadAction::Discard),
        _ => None,
    }
}

/// The dry run or the change of `action` on the dead rows `filters` select (and, when given,
/// only the `pinned` ones). The ids, in insert order.
async fn on_rows<S: ConsoleStore>(
    console: &Console<S>,
    viewer: &Viewer,
    filters: &OutboxFilters,
    pinned: Option<&[i64]>,
    action: DeadAction,
    reason: &str,
    apply: bool,
) -> Result<Vec<i64>, inboxed_core::BoxError> {
    let filter = filters.dead(pinned);
    let params = DeadParams {
        filter: &filter,
        action,
        actor: &viewer.name,
        reason,
        apply,
    };
    console.store.act_on_outbox(&params).await
}

pub(crate) async fn confirm<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    Query(filters): Query<OutboxFilters>,
    Query(form): Query<Confirmed>,
) -> Response {
    if let Some(refusal) = refused(&console, &viewer, None) {
        return refusal;
    }
    confirmation(&console, &viewer, &filters, &form.action, None).await
}

async fn confirmation<S: ConsoleStore>(
    console: &Console<S>,
    viewer: &Viewer,
    filters: &OutboxFilters,
    action_name: &str,
    changed: Option<usize>,
) -> Response {
    let prefix = console.config.prefix.as_str();
    let Some(action) = dead_action(action_name) else {
        return failure(
            &console.config,
            viewer,
            StatusCode::BAD_REQUEST,
            "no such action",
        );
    };
    if !filters.actionable() && filters.id.is_none() {
        return failure(
            &console.config,
            viewer,
            StatusCode::BAD_REQUEST,
            "retry and discard select by destination, ordering key and message id only",
        );
    }
    let ids = match on_rows(console, viewer, filters, None, action, "", false).await {
        Ok(ids) => ids,
        Err(e) => return unavailable(&console.config, viewer, "the outbox", &e),
    };
    let (verb, effect) = match action {
        DeadAction::Retry => (
            "Retry",
            "made pending again, as new (attempts 0), and published by the next relay pass \
             under the same message id",
        ),
        _ => (
            "Discard",
            "deleted for good: never published. Rows parked behind them by their ordering key \
             are published next",
        ),
    };
    let n = ids.len();
    let body = html! {
        div.confirm {
            (changed_note(changed))
            p { "Selected: " (filters.describe()) ", dead only." }
            p.count { strong { (n) } " dead outbox row(s) match." }
            @if n > MOST_ACTED {
                p.warn { "More than " (MOST_ACTED) ": narrow the filter (a destination, an \
                    ordering key), or use `inboxed outbox " (action_name) "`." }
            } @else if n > 0 {
                p { "They will be " (effect) "." }
                form method="post" action={ (prefix) "/outbox/act" } {
                    (filters.hidden())
                    input type="hidden" name="action" value=(action_name);
                    (form_tail(&console.csrf.token(viewer), &ids,
                        &format!("{verb} {n} outbox row(s)")))
                }
            }
        }
    };
    let title = format!("{verb} dead outbox rows");
    (
        shown(changed),
        page(&console.config, viewer, &title, false, body),
    )
        .into_response()
}

pub(crate) async fn act<S: ConsoleStore>(
    State(console): State<Arc<Console<S>>>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    RawForm(body): RawForm,
) -> Response {
    let (filters, form, ids): (OutboxFilters, _, _) =
        match posted(&console, &viewer, &headers, &body) {
            Ok(posted) => posted,
            Err(refusal) => return *refusal,
        };
    let prefix = console.config.prefix.as_str();
    let Some(action) = dead_action(&form.action) else {
        return failure(
            &console.config,
            &viewer,
            StatusCode::BAD_REQUEST,
            "no such action",
        );
    };
    let still = match on_rows(&console, &viewer, &filters, Some(&ids), action, "", false).await {
        Ok(still) => still.len(),
        Err(e) => return unavailable(&console.config, &viewer, "the outbox", &e),
    };
    if still != ids.len() {
        return confirmation(&console, &viewer, &filters, &form.action, Some(still)).await;
    }
    let why = form.why.trim();
    let done = match on_rows(&console, &viewer, &filters, Some(&ids), action, why, true).await {
        Ok(done) => done,
        Err(e) => return unavailable(&console.config, &viewer, "the outbox", &e),
    };
    let verb = if action == DeadAction::Retry {
        "Retried"
    } else {
        "Discarded"
    };
    let body = html! {
        p.done { (verb) " " strong { (done.len()) } " outbox row(s), recorded in the "
            a href={ (prefix) "/audit" } { "audit trail" } " as " (viewer.name) "." }
        @if action == DeadAction::Retry {
            ul { @for id in &done { li { a href={ (prefix) "/outbox/" (id) } { "outbox row " (id) } } } }
        }
        p { a href={ (prefix) "/outbox?status=dead" } { "Back to the dead outbox rows" } }
    };
    page(
        &console.config,
        &viewer,
        &format!("{verb} dead outbox rows"),
        false,
        body,
    )
    .into_response()
}
