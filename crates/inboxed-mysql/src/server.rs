//! The server under the store: what the inbox needs of its version and settings, and the
//! refusal, by the setting's name, of a server that cannot keep the guarantee.

use inboxed_core::StoreError;
use inboxed_core::store::DurabilityReport;

/// What [`MySqlStore::check_server`](crate::MySqlStore::check_server) reads of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// `VERSION()`, for example `10.11.19-MariaDB-0+deb12u1` or `8.0.36`.
    pub version: String,
    /// `innodb_flush_log_at_trx_commit`.
    pub flush_log_at_trx_commit: i64,
    /// Whether the binary log is on (`log_bin`).
    pub log_bin: bool,
    /// `sync_binlog`.
    pub sync_binlog: i64,
    /// The session's `sql_mode`.
    pub sql_mode: String,
    /// The session's `default_storage_engine`.
    pub storage_engine: String,
}

/// Refuses a server the inbox cannot keep its guarantee on, naming the setting; otherwise the
/// settings it checked, for the start-up log.
///
/// # Errors
/// [`StoreError::NonDurable`] for `innodb_flush_log_at_trx_commit` other than 1, or
/// `sync_binlog` other than 1 with the binary log on; [`StoreError::ServerUnfit`] for a
/// version without `SKIP LOCKED`, a `sql_mode` that is not strict, or a storage engine other
/// than InnoDB.
pub fn judge(s: &Server) -> Result<DurabilityReport, StoreError> {
    if !skips_locked(&s.version) {
        return Err(StoreError::ServerUnfit {
            setting: "version",
            value: s.version.clone(),
            hint: "the store needs SELECT … FOR UPDATE SKIP LOCKED (MySQL 8.0.1), JSON_TABLE \
                   (8.0.4) and enforced CHECK constraints (8.0.16): MySQL 8.0.16 or later, \
                   MariaDB 10.6 or later",
        });
    }
    if s.flush_log_at_trx_commit != 1 {
        return Err(StoreError::NonDurable {
            setting: "innodb_flush_log_at_trx_commit",
            value: s.flush_log_at_trx_commit.to_string(),
            hint: "Set innodb_flush_log_at_trx_commit = 1 (the default), so that a commit is \
                   on disk before the server acknowledges it.",
        });
    }
    if s.log_bin && s.sync_binlog != 1 {
        return Err(StoreError::NonDurable {
            setting: "sync_binlog",
            value: s.sync_binlog.to_string(),
            hint: "With the binary log on, set sync_binlog = 1 (MariaDB ships 0): otherwise a \
                   crash can drop acknowledged commits from the binary log, and a replica or a \
                   recovery that trusts it loses them.",
        });
    }
    let strict = s
        .sql_mode
        .split(',')
        .any(|m| m == "STRICT_TRANS_TABLES" || m == "STRICT_ALL_TABLES");
    if !strict {
        return Err(StoreError::ServerUnfit {
            setting: "sql_mode",
            value: s.sql_mode.clone(),
            hint: "add STRICT_TRANS_TABLES (or STRICT_ALL_TABLES): without a strict mode a \
                   too-long message id is cut with a warning, and a different message sharing \
                   the cut prefix is then taken for a duplicate and lost",
        });
    }
    if !s.storage_engine.eq_ignore_ascii_case("InnoDB") {
        return Err(StoreError::ServerUnfit {
            setting: "default_storage_engine",
            value: s.storage_engine.clone(),
            hint: "use InnoDB: the claim must commit in one transaction with the business \
                   tables, and an engine without transactions (MyISAM, Aria) commits each \
                   statement on its own",
        });
    }
    Ok(DurabilityReport {
        settings: vec![
            ("version", s.version.clone()),
            (
                "innodb_flush_log_at_trx_commit",
                s.flush_log_at_trx_commit.to_string(),
            ),
            ("log_bin", if s.log_bin { "ON" } else { "OFF" }.to_owned()),
            ("sync_binlog", s.sync_binlog.to_string()),
            ("sql_mode", s.sql_mode.clone()),
        ],
        warnings: Vec::new(),
    })
}

/// Whether `version` (`VERSION()`) has what the store uses: `SKIP LOCKED` (MySQL 8.0.1),
/// `JSON_TABLE` (8.0.4) and CHECK constraints it enforces (8.0.16; the partitioned table's ties
/// a key to its partition); MariaDB has them all from 10.6.
fn skips_locked(version: &str) -> bool {
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let v = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    if version.contains("MariaDB") {
        v >= (10, 6, 0)
    } else {
        v >= (8, 0, 16)
    }
}

/// `url` with its password replaced, for an error message.
pub(crate) fn url_without_password(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mariadb() -> Server {
        Server {
            version: "10.11.19-MariaDB-0+deb12u1".to_owned(),
            flush_log_at_trx_commit: 1,
            log_bin: false,
            sync_binlog: 0,
            sql_mode: "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO".to_owned(),
            storage_engine: "InnoDB".to_owned(),
        }
    }

    fn refused(s: &Server) -> &'static str {
        match judge(s) {
            Err(
                StoreError::NonDurable { setting, .. } | StoreError::ServerUnfit { setting, .. },
            ) => setting,
            other => panic!("not refused by a setting: {other:?}"),
        }
    }

    #[test]
    fn each_unfit_setting_is_refused_by_name() {
        assert!(judge(&mariadb()).is_ok());
        let with = |f: fn(&mut Server)| {
            let mut s = mariadb();
            f(&mut s);
            s
        };
        assert_eq!(
            refused(&with(|s| s.flush_log_at_trx_commit = 2)),
            "innodb_flush_log_at_trx_commit"
        );
        assert_eq!(refused(&with(|s| s.log_bin = true)), "sync_binlog");
        assert!(
            judge(&with(|s| {
                s.log_bin = true;
                s.sync_binlog = 1;
            }))
            .is_ok()
        );
        assert_eq!(
            refused(&with(|s| s.sql_mode = "NO_ENGINE_SUBSTITUTION".to_owned())),
            "sql_mode"
        );
        assert_eq!(refused(&with(|s| s.sql_mode = String::new())), "sql_mode");
        assert_eq!(
            refused(&with(|s| s.storage_engine = "Aria".to_owned())),
            "default_storage_engine"
        );
        assert_eq!(
            refused(&with(|s| s.version = "10.5.23-MariaDB".to_owned())),
            "version"
        );
        assert_eq!(
            refused(&with(|s| s.version = "5.7.44-log".to_owned())),
            "version"
        );
        assert_eq!(
            refused(&with(|s| s.version = "8.0.15".to_owned())),
            "version"
        );
        assert!(judge(&with(|s| s.version = "8.0.36".to_owned())).is_ok());
        assert!(judge(&with(|s| s.version = "11.4.2-MariaDB".to_owned())).is_ok());
    }

    #[test]
    fn a_url_in_an_error_hides_its_password() {
        assert_eq!(
            url_without_password("mysql://app:s3cret@db:3306"),
            "mysql://app:***@db:3306"
        );
        assert_eq!(url_without_password("mysql://db/x"), "mysql://db/x");
    }
}
