//! Picks the backend from the URL scheme at run time. The store trait is not object-safe, so
//! this is an enum rather than a `dyn Store`.

use anyhow::Context;

use inboxed_mysql::MySqlStore;
use inboxed_postgres::PgStore;
use inboxed_sqlite::SqliteStore;

/// Where the inbox tables are: the flags every database command shares. Each also comes from
/// its environment variable or from the TOML file given with `--config`, in that order of
/// precedence (`database_url`, `schema`, `table_prefix`, `partition_interval` keys).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DbArgs {
    /// Database URL: postgres://…, mysql://…/database (not every command yet) or
    /// sqlite://path (a plain path is taken as SQLite).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// Schema of the inbox tables (PostgreSQL; SQLite keeps them in `main`). Lowercase letters,
    /// digits and `_`.
    #[arg(long, env = "INBOXED_SCHEMA")]
    schema: Option<String>,
    /// Prefix of the inbox table names (default `inboxed_`). Lowercase letters, digits and `_`.
    #[arg(long, env = "INBOXED_TABLE_PREFIX")]
    table_prefix: Option<String>,
    /// The application keeps processed keys in time partitions of this length (PostgreSQL,
    /// `PgStore::partitioned`), for example 1d: purge then drops partitions, stats reads them.
    #[arg(long, env = "INBOXED_PARTITION_INTERVAL", value_parser = super::duration::parse_duration)]
    partition_interval: Option<std::time::Duration>,
    /// TOML file with any of the settings above, under the same names with `_`.
    #[arg(long, env = "INBOXED_CONFIG")]
    config: Option<std::path::PathBuf>,
}

/// The `--config` file's keys.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct DbFile {
    database_url: Option<String>,
    schema: Option<String>,
    table_prefix: Option<String>,
    partition_interval: Option<String>,
}

impl DbArgs {
    /// The same settings on another database: a tenant's, for a command that reads several.
    pub(crate) fn with_url(&self, url: &str) -> Self {
        Self {
            database_url: Some(url.to_owned()),
            ..self.clone()
        }
    }

    /// Flags and environment over the `--config` file.
    fn resolved(&self) -> anyhow::Result<DbFile> {
        let file = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                toml::from_str::<DbFile>(&text)
                    .with_context(|| format!("invalid settings in {}", path.display()))?
            }
            None => DbFile::default(),
        };
        Ok(DbFile {
            database_url: self.database_url.clone().or(file.database_url),
            schema: self.schema.clone().or(file.schema),
            table_prefix: self.table_prefix.clone().or(file.table_prefix),
            partition_interval: file.partition_interval,
        })
    }

    /// The database URL, for messages (its password replaced).
    pub(crate) fn shown_url(&self) -> String {
        self.resolved()
            .ok()
            .and_then(|f| f.database_url)
            .map_or_else(|| "(no database URL)".to_owned(), |u| redact(&u))
    }

    /// Like [`DbArgs::connect`], for commands that only read or change existing tables: an
    /// SQLite path that does not exist is an error rather than a new, empty database.
    pub(crate) async fn connect_existing(&self, max_connections: u32) -> anyhow::Result<AnyStore> {
        let file = self.resolved()?;
        if let Some(url) = file.database_url.as_deref()
            && !["postgres://", "postgresql://", "mysql://", "mariadb://"]
                .iter()
                .any(|server| url.starts_with(server))
        {
            let path = url
                .trim_start_matches("sqlite://")
                .trim_start_matches("sqlite:")
                .split('?')
                .next()
                .unwrap_or_default();
            if !path.is_empty() && path != ":memory:" && !std::path::Path::new(path).exists() {
                anyhow::bail!("no SQLite database at {path} (inboxed migrate creates one)");
            }
        }
        self.connect(max_connections).await
    }

    /// Connects with at most `max_connections`, in the chosen namespace.
    pub(crate) async fn connect(&self, max_connections: u32) -> anyhow::Result<AnyStore> {
        let file = self.resolved()?;
        let url = file.database_url.as_deref().context(
            "no database: give --database-url, set DATABASE_URL, or database_url in --config",
        )?;
        let interval = match (self.partition_interval, &file.partition_interval) {
            (Some(i), _) => Some(i),
            (None, Some(text)) => Some(
                super::duration::parse_duration(text)
                    .map_err(anyhow::Error::msg)
                    .context("partition_interval in --config")?,
            ),
            (None, None) => None,
        };
        let is_pg = url.starts_with("postgres://") || url.starts_with("postgresql://");
        // MySQL's schema is the database, named in the URL.
        let url_database = mysql_database(url);
        let schema = file
            .schema
            .as_deref()
            .or(url_database.as_deref())
            .unwrap_or(if is_pg { "public" } else { "main" });
        let prefix = file.table_prefix.as_deref().unwrap_or("inboxed_");
        let store = AnyStore::connect_in(url, max_connections, Some((schema, prefix))).await?;
        match (store, interval) {
            (AnyStore::Postgres(s), Some(interval)) => Ok(AnyStore::Postgres(s.partitioned(
                inboxed_core::retention::PartitionConfig::default().interval(interval),
            ))),
            (AnyStore::MySql(s), Some(interval)) => Ok(AnyStore::MySql(s.partitioned(
                inboxed_core::retention::PartitionConfig::default().interval(interval),
            ))),
            (AnyStore::Sqlite(_), Some(_)) => {
                anyhow::bail!(
                    "--partition-interval is for PostgreSQL and MySQL; SQLite has no partitions"
                )
            }
            (store, _) => Ok(store),
        }
    }
}

/// The database a `mysql://` or `mariadb://` URL names, if it is one and names one.
fn mysql_database(url: &str) -> Option<String> {
    use std::str::FromStr;
    let rest = url
        .strip_prefix("mysql://")
        .or_else(|| url.strip_prefix("mariadb://"))?;
    sqlx::mysql::MySqlConnectOptions::from_str(&format!("mysql://{rest}"))
        .ok()?
        .get_database()
        .map(str::to_owned)
}

/// `$body` with `$s` bound to the store inside `$store`, whichever its backend: one line per
/// operation instead of a `match` with three copies.
macro_rules! on_store {
    ($store:expr, $s:ident => $body:expr) => {
        match $store {
            $crate::cli::database::AnyStore::Postgres($s) => $body,
            $crate::cli::database::AnyStore::Sqlite($s) => $body,
            $crate::cli::database::AnyStore::MySql($s) => $body,
        }
    };
}
pub(crate) use on_store;

/// A store of any backend.
#[derive(Debug, Clone)]
pub(crate) enum AnyStore {
    Postgres(PgStore),
    Sqlite(SqliteStore),
    /// MySQL or MariaDB.
    MySql(MySqlStore),
}

impl AnyStore {
    /// `postgres://` or `postgresql://` for PostgreSQL; `mysql://` or `mariadb://` for MySQL and
    /// MariaDB; `sqlite://` or a plain file path for SQLite.
    pub(crate) async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        Self::connect_in(url, max_connections, None).await
    }

    /// Like [`AnyStore::connect`], with the tables in `namespace` (schema, table prefix) when
    /// given; otherwise each backend's default.
    pub(crate) async fn connect_in(
        url: &str,
        max_connections: u32,
        namespace: Option<(&str, &str)>,
    ) -> anyhow::Result<Self> {
        let store = Self::connect_default(url, max_connections).await?;
        let Some((schema, prefix)) = namespace else {
            return Ok(store);
        };
        let ns = inboxed_core::Namespace::new(schema, prefix)?;
        Ok(match store {
            Self::Postgres(s) => Self::Postgres(s.in_namespace(ns)),
            Self::Sqlite(s) => Self::Sqlite(SqliteStore::with_namespace(s.pool().clone(), ns)),
            Self::MySql(s) => Self::MySql(MySqlStore::new(s.pool().clone(), ns)),
        })
    }

    async fn connect_default(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let store = PgStore::connect_within(url, max_connections, connect_timeout()?)
                .await
                .with_context(|| format!("cannot connect to PostgreSQL at {}", redact(url)))?;
            Ok(Self::Postgres(store))
        } else if let Some(rest) = url
            .strip_prefix("mysql://")
            .or_else(|| url.strip_prefix("mariadb://"))
        {
            let url = format!("mysql://{rest}");
            let store = MySqlStore::connect(&url, max_connections)
                .await
                .with_context(|| format!("cannot connect to MySQL at {}", redact(&url)))?;
            Ok(Self::MySql(store))
        } else {
            let url = if url.starts_with("sqlite:") {
                url.to_owned()
            } else {
                format!("sqlite://{url}")
            };
            let store = SqliteStore::connect(&url)
                .await
                .with_context(|| format!("cannot open {url}"))?;
            Ok(Self::Sqlite(store))
        }
    }

    pub(crate) async fn migrate(&self) -> anyhow::Result<Vec<i64>> {
        Ok(match self {
            Self::Postgres(s) => s.migrate().await?,
            Self::Sqlite(s) => s.migrate().await?,
            Self::MySql(s) => s.migrate().await?,
        })
    }

    /// Runs SQL built by this program (never from user input), possibly several statements.
    /// Selects the processed keys of consumer `demo`: PostgreSQL keys store the consumer's
    /// registered id, SQLite keys its name.
    pub(crate) fn demo_keys(&self) -> &'static str {
        match self {
            Self::Postgres(_) => {
                "FROM inboxed_processed_messages \
                 WHERE consumer_id = (SELECT id FROM inboxed_consumers WHERE name = 'demo')"
            }
            Self::Sqlite(_) | Self::MySql(_) => {
                "FROM inboxed_processed_messages WHERE consumer_name = 'demo'"
            }
        }
    }

    pub(crate) async fn execute_script(&self, sql: String) -> anyhow::Result<()> {
        match self {
            Self::Postgres(s) => {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(s.pool())
                    .await?;
            }
            Self::Sqlite(s) => {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(s.pool())
                    .await?;
            }
            Self::MySql(s) => {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                    .execute(s.pool())
                    .await?;
            }
        }
        Ok(())
    }

    /// A query without parameters returning one integer.
    pub(crate) async fn scalar(&self, sql: &str) -> anyhow::Result<i64> {
        let sql = sqlx::AssertSqlSafe(sql.to_owned());
        Ok(match self {
            Self::Postgres(s) => sqlx::query_scalar(sql).fetch_one(s.pool()).await?,
            Self::Sqlite(s) => sqlx::query_scalar(sql).fetch_one(s.pool()).await?,
            Self::MySql(s) => sqlx::query_scalar(sql).fetch_one(s.pool()).await?,
        })
    }

    /// A query without parameters returning `(text, integer)` rows.
    pub(crate) async fn pairs(&self, sql: &'static str) -> anyhow::Result<Vec<(String, i64)>> {
        Ok(match self {
            Self::Postgres(s) => sqlx::query_as(sql).fetch_all(s.pool()).await?,
            Self::Sqlite(s) => sqlx::query_as(sql).fetch_all(s.pool()).await?,
            Self::MySql(s) => sqlx::query_as(sql).fetch_all(s.pool()).await?,
        })
    }

    /// The store-then-process backlog and dead letters of every consumer.
    pub(crate) async fn observe(&self) -> anyhow::Result<inboxed_core::observe::Observation> {
        use inboxed_core::observe::ObserveStore;
        Ok(match self {
            Self::Postgres(s) => s.observe().await?,
            Self::Sqlite(s) => s.observe().await?,
            Self::MySql(s) => s.observe().await?,
        })
    }

    /// Dead letters matching `filter`.
    pub(crate) async fn list_dead_letters(
        &self,
        filter: &inboxed_core::observe::DeadLetterFilter<'_>,
    ) -> anyhow::Result<Vec<inboxed_core::observe::DeadLetterSummary>> {
        use inboxed_core::observe::ObserveStore;
        Ok(match self {
            Self::Postgres(s) => s.list_dead_letters(filter).await?,
            Self::Sqlite(s) => s.list_dead_letters(filter).await?,
            Self::MySql(s) => s.list_dead_letters(filter).await?,
        })
    }

    /// One dead letter in full.
    pub(crate) async fn dead_letter_by_id(
        &self,
        id: i64,
    ) -> anyhow::Result<Option<inboxed_core::observe::DeadLetterRecord>> {
        use inboxed_core::observe::ObserveStore;
        Ok(match self {
            Self::Postgres(s) => s.dead_letter_by_id(id).await?,
            Self::Sqlite(s) => s.dead_letter_by_id(id).await?,
            Self::MySql(s) => s.dead_letter_by_id(id).await?,
        })
    }

    /// Outbox rows matching `filter`, oldest first, without payloads.
    pub(crate) async fn list_outbox(
        &self,
        filter: &inboxed_core::outbox::OutboxFilter,
        limit: u32,
    ) -> anyhow::Result<Vec<inboxed_core::outbox::OutboxEntry>> {
        use inboxed_core::outbox::store::OutboxStore;
        Ok(match self {
            Self::Postgres(s) => s.list_outbox(filter, limit).await?,
            Self::Sqlite(s) => s.list_outbox(filter, limit).await?,
            Self::MySql(s) => s.list_outbox(filter, limit).await?,
        })
    }

    /// One outbox row in full, by row id or message id.
    pub(crate) async fn load_outbox(
        &self,
        id: Option<i64>,
        message_id: Option<&str>,
    ) -> anyhow::Result<Option<inboxed_core::outbox::OutboxEntry>> {
        use inboxed_core::outbox::store::OutboxStore;
        Ok(match self {
            Self::Postgres(s) => s.load_outbox(id, message_id).await?,
            Self::Sqlite(s) => s.load_outbox(id, message_id).await?,
            Self::MySql(s) => s.load_outbox(id, message_id).await?,
        })
    }

    /// Retries or discards dead outbox rows (or finds them, for a dry run); their ids.
    pub(crate) async fn act_on_dead(
        &self,
        params: &inboxed_core::outbox::DeadParams<'_>,
    ) -> anyhow::Result<Vec<i64>> {
        use inboxed_core::outbox::store::OutboxStore;
        Ok(match self {
            Self::Postgres(s) => s.act_on_dead(params).await?,
            Self::Sqlite(s) => s.act_on_dead(params).await?,
            Self::MySql(s) => s.act_on_dead(params).await?,
        })
    }

    /// Migration versions not applied yet.
    pub(crate) async fn pending_migrations(&self) -> anyhow::Result<Vec<i64>> {
        use inboxed_core::observe::ObserveStore;
        Ok(match self {
            Self::Postgres(s) => s.pending_migrations().await?,
            Self::Sqlite(s) => s.pending_migrations().await?,
            Self::MySql(s) => s.pending_migrations().await?,
        })
    }

    /// A consumer's processed-key figures.
    pub(crate) async fn processed_stats(
        &self,
        consumer: &inboxed_core::ConsumerName,
    ) -> anyhow::Result<inboxed_core::retention::store::ProcessedStats> {
        use inboxed_core::retention::RetentionStore;
        Ok(match self {
            Self::Postgres(s) => s.processed_stats(consumer).await?,
            Self::Sqlite(s) => s.processed_stats(consumer).await?,
            Self::MySql(s) => s.processed_stats(consumer).await?,
        })
    }

    pub(crate) fn backend(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres",
            Self::Sqlite(_) => "sqlite",
            Self::MySql(_) => "mysql",
        }
    }
}

/// The URL with any password replaced, for messages and reports: the one in the user-info
/// part (up to the last `@` before the host) and a `password=` query parameter.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest
        .find(['/', '?'])
        .map_or((rest, ""), |at| rest.split_at(at));
    let authority = match authority.rsplit_once('@') {
        Some((auth, host)) => match auth.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => format!("{auth}@{host}"),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// How long a command tries to reach PostgreSQL: `INBOXED_CONNECT_TIMEOUT` (`10s`, `2m`),
/// default 10 s. A refused connection is tried again until then, for a database still
/// starting beside the command.
fn connect_timeout() -> anyhow::Result<std::time::Duration> {
    match std::env::var("INBOXED_CONNECT_TIMEOUT") {
        Ok(text) => super::duration::parse_duration(&text)
            .map_err(|e| anyhow::anyhow!("INBOXED_CONNECT_TIMEOUT: {e}")),
        Err(_) => Ok(std::time::Duration::from_secs(10)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_never_printed() {
        assert_eq!(
            super::redact("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(super::redact("sqlite://x.db"), "sqlite://x.db");
        assert_eq!(
            super::redact("postgres://u:p@ss@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(
            super::redact("postgres://h/db?user=u&password=secret&sslmode=require"),
            "postgres://h/db?user=u&password=***&sslmode=require"
        );
    }
}
