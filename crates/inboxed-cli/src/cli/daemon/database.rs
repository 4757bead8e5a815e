//! `/health`: whether the database answers and its migrations are current, read fresh on each
//! request.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::cli::AnyStore;

/// How long `/health` waits for the database before saying it is down.
const HEALTH_DEADLINE: Duration = Duration::from_secs(5);

/// [`health`] of the one database, or of each tenant's under its name: 503 when any is
/// down (a probe behind a load balancer sees the worst), `degraded` when any is.
pub(crate) async fn health_of_all(stores: &[(Option<String>, AnyStore)]) -> (StatusCode, Value) {
    if let [(None, store)] = stores {
        return health(store).await;
    }
    let each = stores.iter().map(|(name, store)| async move {
        (name.clone().unwrap_or_default(), health(store).await)
    });
    let each = futures_util::future::join_all(each).await;
    let status = |s: &str| each.iter().any(|(_, (_, body))| body["status"] == s);
    let (code, worst) = if status("down") {
        (StatusCode::SERVICE_UNAVAILABLE, "down")
    } else if status("degraded") {
        (StatusCode::OK, "degraded")
    } else {
        (StatusCode::OK, "ok")
    };
    let tenants: serde_json::Map<String, Value> = each
        .into_iter()
        .map(|(name, (_, body))| (name, body))
        .collect();
    (code, json!({ "status": worst, "tenants": tenants }))
}

/// 200 when the database answers and its migrations are current (`degraded` if claims with
/// expired leases wait for a reaper); 503 otherwise. Read fresh on each request.
pub(crate) async fn health(store: &AnyStore) -> (StatusCode, Value) {
    let checked = tokio::time::timeout(HEALTH_DEADLINE, async {
        // Migrations first: on tables never migrated, the observation itself would fail.
        let pending = store.pending_migrations().await?;
        if !pending.is_empty() {
            return Ok((pending, None));
        }
        Ok::<_, anyhow::Error>((pending, Some(store.observe().await?)))
    })
    .await
    .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer within {HEALTH_DEADLINE:?}")));
    match checked {
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "status": "down", "database": format!("{e:#}") }),
        ),
        Ok((pending, None)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "status": "down", "database": "ok", "migrations_pending": pending }),
        ),
        Ok((_, Some(seen))) => {
            let stale: u64 = seen.backlog.iter().map(|b| b.expired_leases).sum();
            let status = if stale > 0 { "degraded" } else { "ok" };
            (
                StatusCode::OK,
                json!({ "status": status, "database": "ok", "migrations": "current",
                        "expired_leases": stale }),
            )
        }
    }
}
