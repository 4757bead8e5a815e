//! The consoles of a database per tenant (the deployment `inboxed_core::Tenants` serves): one
//! console per tenant under `/t/{tenant}`, with the same users and settings, and an index at
//! `/` that reads every tenant's backlog side by side, so an operator sees which tenant is
//! stuck before opening it. Each tenant's pages and actions reach its database only: a
//! tenant is a path, never a parameter a form could change.

use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use inboxed_core::observe::Observation;
use maud::{Markup, html};

use crate::access::{self, Viewer};
use crate::layout::{ago, document, home};
use crate::{Console, ConsoleConfig, ConsoleStore, assets};

/// How long the index waits for one tenant's database before showing it as not answering: one
/// tenant down must not take the others' figures with it.
const TENANT_DEADLINE: Duration = Duration::from_secs(5);

/// The longest tenant name: it is a path segment and a metric label.
const LONGEST_NAME: usize = 64;

/// Where a tenant's console sits: its name, shown in every page's navigation, and the index's
/// path, linked from it.
#[derive(Debug, Clone)]
pub(crate) struct TenantPlace {
    pub(crate) name: String,
    pub(crate) index: String,
}

/// A tenant [`TenantConsoles`] refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TenantError {
    /// The name is not a path segment of letters, digits, `.`, `_` and `-` (64 at most, not
    /// only dots).
    #[error(
        "tenant name {0:?}: use 1 to 64 letters, digits, '.', '_' or '-' (it is a path segment)"
    )]
    Name(String),
    /// Two tenants of one name.
    #[error("tenant {0:?} is given twice")]
    Twice(String),
}

/// The consoles of several databases, one per tenant, with an index of them all. Nest it as
/// a [`Console`] is nested (set [`ConsoleConfig::prefix`] to where):
///
/// ```no_run
/// # async fn example(a: inboxed_sqlite::SqliteStore, b: inboxed_sqlite::SqliteStore)
/// # -> Result<(), inboxed_console::TenantError> {
/// use inboxed_console::{ConsoleConfig, TenantConsoles};
///
/// let mut config = ConsoleConfig::default();
/// config.prefix = "/inboxed".to_owned();
/// let consoles = TenantConsoles::new(config).tenant("acme", a)?.tenant("globex", b)?;
/// let app = axum::Router::new().nest("/inboxed", consoles.router());
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TenantConsoles<S> {
    config: ConsoleConfig,
    tenants: Vec<(String, S)>,
}

impl<S: ConsoleStore> TenantConsoles<S> {
    /// No tenant yet; `config` is every tenant's console's (its prefix is the index's).
    #[must_use]
    pub fn new(config: ConsoleConfig) -> Self {
        Self {
            config,
            tenants: Vec::new(),
        }
    }

    /// Adds `name`'s console, over `store`, at `/t/{name}`.
    ///
    /// # Errors
    ///
    /// [`TenantError`] for a name that is not a plain path segment, or one given before.
    pub fn tenant(mut self, name: &str, store: S) -> Result<Self, TenantError> {
        check_tenant_name(name)?;
        if self.tenants.iter().any(|(n, _)| n == name) {
            return Err(TenantError::Twice(name.to_owned()));
        }
        self.tenants.push((name.to_owned(), store));
        Ok(self)
    }

    /// The index at `/` and each tenant's console at `/t/{tenant}` (its routes as
    /// [`Console::router`] lists them). Every route asks for credentials first.
    pub fn router(self) -> Router {
        let mut router = Router::new();
        for (name, store) in &self.tenants {
            let mut config = self.config.clone();
            config.prefix = format!("{}/t/{name}", self.config.prefix);
            config.tenant = Some(TenantPlace {
                name: name.clone(),
                index: self.config.prefix.clone(),
            });
            let console = Console::new(store.clone()).with_config(config);
            router = router.nest(&format!("/t/{name}"), console.router());
        }
        let access = Arc::new(self.config.clone());
        let index = Router::new()
            .route("/", get(index::<S>))
            .route("/assets/console.js", get(assets::script))
            .layer(axum::middleware::from_fn_with_state(
                access,
                access::authenticate,
            ))
            .with_state(Arc::new(self));
        router.merge(index)
    }
}

/// Whether `name` can be a tenant's: a path segment as it is (and so a metric label).
///
/// # Errors
///
/// [`TenantError::Name`] saying what a name may hold.
pub fn check_tenant_name(name: &str) -> Result<(), TenantError> {
    let plain = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !plain || name.len() > LONGEST_NAME || name.bytes().all(|b| b == b'.') {
        return Err(TenantError::Name(name.to_owned()));
    }
    Ok(())
}

/// `/`: each tenant's backlog, dead letters and outbox in one row, read side by side.
async fn index<S: ConsoleStore>(
    State(consoles): State<Arc<TenantConsoles<S>>>,
    Extension(viewer): Extension<Viewer>,
) -> Response {
    let reads = consoles.tenants.iter().map(|(name, store)| async move {
        let seen = tokio::time::timeout(TENANT_DEADLINE, store.observe()).await;
        let seen = match seen {
            Ok(Ok(seen)) => Ok(seen),
            Ok(Err(e)) => Err(inboxed_core::error_chain(&*e)),
            Err(_) => Err(format!("no answer within {TENANT_DEADLINE:?}")),
        };
        (name.as_str(), seen)
    });
    let seen = futures_util::future::join_all(reads).await;
    let prefix = consoles.config.prefix.as_str();
    let body = html! {
        div.scroll { table {
            thead { tr {
                th { "Tenant" } th { "Pending" } th { "Processing" } th { "Dead rows" }
                th { "Oldest pending" } th { "Expired leases" } th { "Dead letters" }
                th { "Outbox unsent" } th { "Outbox dead" }
            } }
            tbody { @for (name, seen) in &seen { (tenant_row(prefix, name, seen)) } }
        } }
    };
    let nav = html! { a href=(home(prefix)) { "Tenants" } };
    document(prefix, &viewer, "Tenants", true, &nav, body).into_response()
}

/// One tenant's row of the index, or why it could not be read.
fn tenant_row(prefix: &str, name: &str, seen: &Result<Observation, String>) -> Markup {
    let link = html! { a href={ (prefix) "/t/" (name) } { (name) } };
    let seen = match seen {
        Ok(seen) => seen,
        Err(e) => {
            return html! { tr { td { (link) } td.failure colspan="8" { "not read: " (e) } } };
        }
    };
    let sum =
        |f: fn(&inboxed_core::observe::Backlog) -> u64| -> u64 { seen.backlog.iter().map(f).sum() };
    let oldest = seen.backlog.iter().filter_map(|b| b.oldest_pending).min();
    let letters: u64 = seen.dead_letters.iter().map(|d| d.count).sum();
    let unsent: u64 = seen.outbox.iter().map(|o| o.pending + o.sending).sum();
    let outbox_dead: u64 = seen.outbox.iter().map(|o| o.dead).sum();
    let (dead, expired) = (sum(|b| b.dead), sum(|b| b.expired_leases));
    html! { tr {
        td { (link) }
        td { (sum(|b| b.pending)) }
        td { (sum(|b| b.processing)) }
        td class=[(dead > 0).then_some("warn")] { (dead) }
        td { (ago(oldest)) }
        td class=[(expired > 0).then_some("warn")] { (expired) }
        td class=[(letters > 0).then_some("warn")] {
            a href={ (prefix) "/t/" (name) "/dead-letters" } { (letters) }
        }
        td { (unsent) }
        td class=[(outbox_dead > 0).then_some("warn")] { (outbox_dead) }
    } }
}

#[cfg(test)]
mod tests {
    use super::check_tenant_name as check_name;

    #[test]
    fn a_tenant_name_is_a_plain_path_segment() {
        for good in ["acme", "eu-west.1", "A_b", &"x".repeat(64)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "é",
            "a%2f",
            "a?b",
            &"x".repeat(65),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
