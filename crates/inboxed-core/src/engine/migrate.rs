//! The migration runner, for every engine: `sqlx::migrate!` embeds fixed SQL, and the schema
//! and prefix here are chosen at run time. The engine gives its migrations, the statements
//! on its migrations table, and (PostgreSQL, MySQL) a lock that serialises concurrent
//! migrators and the creation of a missing schema; SQLite's write transaction serialises them
//! already. MySQL commits each DDL statement on its own, so there the run is not one
//! transaction: its migrations are written to be applied again after a crash.

use super::{Args, Columns, Conn, Engine};
use crate::driver::Transaction as _;
use crate::error::StoreError;
use crate::migration::{self, Migration};
use crate::namespace::Namespace;

/// Applies the missing migrations of `migrations` in one transaction; the versions applied
/// now. Every statement is planned fresh ([`Engine::fresh`]): each runs once a deploy, and
/// may run through a transaction-pooling proxy that does not track prepared statements.
///
/// # Errors
/// A statement failed (nothing is applied then), or the applied migrations do not match
/// these ([`StoreError::MigrationChanged`], [`StoreError::MigrationUnknown`]).
pub async fn run<E: Engine>(
    e: &E,
    ns: &Namespace,
    migrations: &[Migration],
) -> Result<Vec<i64>, StoreError> {
    let qs = e.queries();
    let mut tx = e.begin_write().await?;
    if !qs.migrate_lock.is_empty() {
        let q = e
            .fresh(&qs.migrate_lock)
            .text(ns.schema())
            .text(ns.prefix());
        E::execute(q, &mut tx).await?;
    }
    if !qs.schema_exists.is_empty() {
        let q = e.fresh(&qs.schema_exists).text(ns.schema());
        let exists = first_flag(E::fetch_all(q, &mut tx).await?)?;
        if !exists {
            // Only when missing: creating a schema, even IF NOT EXISTS, needs a privilege on
            // the database that the owner of an existing schema may lack.
            E::execute_script(&qs.create_schema, &mut tx).await?;
        }
    }
    E::execute_script(&qs.migrations_table, &mut tx).await?;
    let applied = applied(e, &mut tx).await?;
    let mut now = Vec::new();
    for m in migration::pending(migrations, &applied)? {
        E::execute_script(&ns.render(m.sql), &mut tx).await?;
        let q = e
            .fresh(&qs.migration_record)
            .int(m.version)
            .text(m.description)
            .bytes(&m.checksum());
        E::execute(q, &mut tx).await?;
        now.push(m.version);
    }
    if !qs.migrate_unlock.is_empty() {
        // A lock that outlives the transaction (MySQL's named lock) is released by the
        // engine's statement, which commits first where DDL has committed on its own already.
        let q = e
            .fresh(&qs.migrate_unlock)
            .text(ns.schema())
            .text(ns.prefix());
        E::execute(q, &mut tx).await?;
    }
    tx.commit().await?;
    Ok(now)
}

/// The versions not applied yet, without applying anything (a health check's question): all
/// of them when the migrations table does not exist.
///
/// # Errors
/// A statement failed, or the applied migrations do not match these.
pub async fn pending<E: Engine>(
    e: &E,
    ns: &Namespace,
    migrations: &[Migration],
) -> Result<Vec<i64>, StoreError> {
    let qs = e.queries();
    let q = e
        .fresh(&qs.migrations_exist)
        .text(ns.schema())
        .text(&format!("{}migrations", ns.prefix()));
    let applied = if first_flag(e.fetch_alone(q).await?)? {
        let rows = e.fetch_alone(e.fresh(&qs.migrations_applied)).await?;
        versions(&rows)?
    } else {
        Vec::new()
    };
    migration::pending_versions(migrations, &applied)
}

async fn applied<E: Engine>(e: &E, conn: &mut Conn<E>) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
    let q = e.fresh(&e.queries().migrations_applied);
    versions(&E::fetch_all(q, conn).await?)
}

/// `(version, checksum)` rows of the migrations table.
fn versions<R: Columns>(rows: &[R]) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
    rows.iter().map(|r| Ok((r.int(0)?, r.bytes(1)?))).collect()
}

fn first_flag<R: Columns>(rows: Vec<R>) -> Result<bool, StoreError> {
    rows.first().map_or(Ok(false), |r| r.flag(0))
}
