//! `--tenant NAME=URL`: a database per tenant (`inboxed_core::Tenants`), for the commands that
//! read several (`stats`, `serve`). Each tenant's database takes the other database settings
//! (schema, table prefix, `--config`) as given.

use anyhow::bail;

use super::database::DbArgs;

/// One `--tenant NAME=URL`.
#[derive(Debug, Clone)]
pub(crate) struct Tenant {
    name: String,
    url: String,
}

/// Reads `NAME=URL` (the URL may hold `=` itself). The name is one the console can serve at
/// `/t/NAME`, for every command alike: a tenant `stats` reports is one `serve` can show.
pub(crate) fn parse(given: &str) -> Result<Tenant, String> {
    match given.split_once('=') {
        Some((name, url)) if !url.is_empty() => {
            inboxed_console::check_tenant_name(name).map_err(|e| e.to_string())?;
            Ok(Tenant {
                name: name.to_owned(),
                url: url.to_owned(),
            })
        }
        _ => Err("takes NAME=URL (a tenant's name and its database URL)".to_owned()),
    }
}

/// The databases a command reads: each tenant's under its name, or `db`'s own, unnamed, when
/// no tenant is given.
pub(crate) fn databases(
    db: &DbArgs,
    tenants: &[Tenant],
) -> anyhow::Result<Vec<(Option<String>, DbArgs)>> {
    let mut databases: Vec<(Option<String>, DbArgs)> = Vec::new();
    for tenant in tenants {
        if databases
            .iter()
            .any(|(n, _)| n.as_deref() == Some(&tenant.name))
        {
            bail!("--tenant {} is given twice", tenant.name);
        }
        databases.push((Some(tenant.name.clone()), db.with_url(&tenant.url)));
    }
    if databases.is_empty() {
        databases.push((None, db.clone()));
    }
    Ok(databases)
}

/// `err` said of `tenant`, when there is one.
pub(crate) fn of(tenant: Option<&str>, err: anyhow::Error) -> anyhow::Error {
    match tenant {
        Some(name) => err.context(format!("tenant {name}")),
        None => err,
    }
}
