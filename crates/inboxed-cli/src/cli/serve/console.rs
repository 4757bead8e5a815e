//! The console of `inboxed serve`: its store (the CLI's dispatching one, reaching each
//! engine's own operations, the ones `inboxed dead-letters` and `inboxed replay` run) and its
//! users, read from a TOML file.

use std::path::Path;

use anyhow::{Context, bail};
use inboxed_console::{ConsoleStore, ConsoleUser, Role};
use inboxed_core::inbox::{Replayed, Selector};
use inboxed_core::metrics::DedupRate;
use inboxed_core::observe::{
    AuditRecord, DeadLetterFilter, DeadLetterRecord, DeadLetterSummary, InboxEntry,
    LetterActParams, LettersActed, Observation, RowFilter,
};
use inboxed_core::outbox::{DeadParams, OutboxBrowse, OutboxEntry};
use inboxed_core::retention::store::ProcessedStats;
use inboxed_core::{BoxError, ConsumerName};
use serde::Deserialize;

use crate::cli::database::{AnyStore, on_store};

/// The console's store in `inboxed serve`: the database's, and where `--metrics-url` names a
/// consumer's Prometheus endpoint, its counters for the dedup hit rate.
#[derive(Debug, Clone)]
pub(crate) struct ServeStore {
    pub(crate) store: AnyStore,
    pub(crate) metrics_url: Option<String>,
}

/// Each engine's store is a console store already (the console's own implementation over
/// the library's operations): this only picks the engine.
impl ConsoleStore for ServeStore {
    async fn processed(&self, consumer: &ConsumerName) -> Result<ProcessedStats, BoxError> {
        on_store!(&self.store, s => ConsoleStore::processed(s, consumer).await)
    }

    async fn dedup_rates(&self) -> Result<Option<Vec<DedupRate>>, BoxError> {
        let Some(url) = &self.metrics_url else {
            return Ok(None);
        };
        Ok(Some(crate::cli::scrape::dedup_rates(url).await?))
    }

    async fn observe(&self) -> Result<Observation, BoxError> {
        on_store!(&self.store, s => ConsoleStore::observe(s).await)
    }

    async fn dead_letters(
        &self,
        filter: &DeadLetterFilter<'_>,
    ) -> Result<Vec<DeadLetterSummary>, BoxError> {
        on_store!(&self.store, s => s.dead_letters(filter).await)
    }

    async fn dead_letter(&self, id: i64) -> Result<Option<DeadLetterRecord>, BoxError> {
        on_store!(&self.store, s => s.dead_letter(id).await)
    }

    async fn act_on_dead_letters(
        &self,
        params: &LetterActParams<'_>,
    ) -> Result<LettersActed, BoxError> {
        on_store!(&self.store, s => ConsoleStore::act_on_dead_letters(s, params).await)
    }

    async fn rows(&self, filter: &RowFilter<'_>) -> Result<Vec<InboxEntry>, BoxError> {
        on_store!(&self.store, s => s.rows(filter).await)
    }

    async fn row(&self, id: i64) -> Result<Option<InboxEntry>, BoxError> {
        on_store!(&self.store, s => s.row(id).await)
    }

    async fn audit_trail(
        &self,
        consumer: Option<&str>,
        limit: u32,
    ) -> Result<Vec<AuditRecord>, BoxError> {
        on_store!(&self.store, s => ConsoleStore::audit_trail(s, consumer, limit).await)
    }

    async fn outbox(&self, browse: &OutboxBrowse<'_>) -> Result<Vec<OutboxEntry>, BoxError> {
        on_store!(&self.store, s => s.outbox(browse).await)
    }

    async fn outbox_row(&self, id: i64) -> Result<Option<OutboxEntry>, BoxError> {
        on_store!(&self.store, s => s.outbox_row(id).await)
    }

    async fn act_on_outbox(&self, params: &DeadParams<'_>) -> Result<Vec<i64>, BoxError> {
        on_store!(&self.store, s => s.act_on_outbox(params).await)
    }

    async fn replay(
        &self,
        consumer: &ConsumerName,
        selector: &Selector,
        include_done: bool,
        actor: &str,
        reason: &str,
        apply: bool,
    ) -> Result<Replayed, BoxError> {
        on_store!(&self.store, s => {
            ConsoleStore::replay(s, consumer, selector, include_done, actor, reason, apply).await
        })
    }
}

/// The users file: one `[[user]]` table each.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsersFile {
    #[serde(default)]
    user: Vec<UserEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserEntry {
    name: String,
    role: Role,
    /// The token itself (16 characters at least), or:
    token: Option<String>,
    /// its SHA-256 digest in hex (`printf %s TOKEN | sha256sum`).
    token_sha256: Option<String>,
    #[serde(default)]
    payloads: bool,
}

/// The users of `path`.
pub(crate) fn users(path: &Path) -> anyhow::Result<Vec<ConsoleUser>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file: UsersFile =
        toml::from_str(&text).with_context(|| format!("invalid users in {}", path.display()))?;
    let mut users = Vec::new();
    for u in file.user {
        let user = match (&u.token, &u.token_sha256) {
            (Some(token), None) => ConsoleUser::with_token(&u.name, u.role, token)?,
            (None, Some(digest)) => ConsoleUser::with_digest(&u.name, u.role, digest)?,
            _ => bail!(
                "console user {:?} in {}: give token or token_sha256, one of them",
                u.name,
                path.display()
            ),
        };
        if users.iter().any(|o: &ConsoleUser| o.name == user.name) {
            bail!(
                "console user {:?} appears twice in {}",
                u.name,
                path.display()
            );
        }
        if let Some(o) = users.iter().find(|o| o.shares_token_with(&user)) {
            bail!(
                "console users {:?} and {:?} in {} have the same token",
                o.name,
                u.name,
                path.display()
            );
        }
        users.push(user.with_payloads(u.payloads));
    }
    if users.is_empty() {
        bail!("{} names no [[user]]", path.display());
    }
    Ok(users)
}

/// The console's routes: one database's [`Console`](inboxed_console::Console), or with
/// tenants a [`TenantConsoles`](inboxed_console::TenantConsoles) of each one's.
pub(crate) fn routes(
    config: inboxed_console::ConsoleConfig,
    stores: Vec<(Option<String>, ServeStore)>,
) -> anyhow::Result<axum::Router> {
    let mut tenants = inboxed_console::TenantConsoles::new(config.clone());
    for (name, store) in stores {
        match name {
            Some(name) => tenants = tenants.tenant(&name, store)?,
            None => {
                return Ok(inboxed_console::Console::new(store)
                    .with_config(config)
                    .router());
            }
        }
    }
    Ok(tenants.router())
}

#[cfg(test)]
mod tests {
    fn users_of(text: &str) -> anyhow::Result<Vec<inboxed_console::ConsoleUser>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("users.toml");
        std::fs::write(&path, text)?;
        super::users(&path)
    }

    #[test]
    fn a_users_file_is_read_and_its_mistakes_refused() {
        let one = "[[user]]\nname = \"ops\"\nrole = \"operator\"\ntoken = \"0123456789abcdef\"\n";
        let users = users_of(one).unwrap();
        assert_eq!(users[0].name, "ops");
        let twice = format!("{one}{}", one.replace("\"ops\"", "\"dev\""));
        let err = users_of(&twice).unwrap_err().to_string();
        assert!(err.contains("same token"), "{err}");
        assert!(users_of(&one.replace("\"ops\"", "\"anonymous\"")).is_err());
        assert!(users_of(&one.replace("0123456789abcdef", "short")).is_err());
        assert!(users_of(&one.replace("operator", "admin")).is_err());
        assert!(users_of("").is_err(), "no user at all");
        let both = one.replace("token = ", "token_sha256 = \"00\"\ntoken = ");
        assert!(users_of(&both).is_err(), "a token and a digest");
    }
}
