//! The demo's business: transfers between accounts, the kind of non-idempotent change the
//! inbox exists for. One handler body for both backends (the placeholders differ).

use serde::Deserialize;

use inboxed_core::{Envelope, Handler, HandlerError, ResultExt};

/// Table setup, valid on both engines. Account ids are generated here, never user input.
pub(super) fn reset_sql(accounts: usize, opening: i64, demo_keys: &str, mysql: bool) -> String {
    let values: Vec<String> = (0..accounts)
        .map(|i| format!("('{}', {opening})", account(i)))
        .collect();
    if mysql {
        // MySQL keys a text column only by a length.
        return format!(
            "DROP TABLE IF EXISTS inboxed_demo_ledger;
             DROP TABLE IF EXISTS inboxed_demo_accounts;
             CREATE TABLE inboxed_demo_accounts (id VARCHAR(64) PRIMARY KEY, balance BIGINT NOT NULL)
                 ENGINE = InnoDB;
             CREATE TABLE inboxed_demo_ledger (message_id VARCHAR(600) NOT NULL,
                 from_account VARCHAR(64) NOT NULL, to_account VARCHAR(64) NOT NULL,
                 amount BIGINT NOT NULL) ENGINE = InnoDB;
             INSERT INTO inboxed_demo_accounts (id, balance) VALUES {};
             DELETE {demo_keys};
             DELETE FROM inboxed_dead_letters WHERE consumer_name = 'demo';
             DELETE FROM inboxed_attempts WHERE consumer_name = 'demo';
             DELETE FROM inboxed_inbox_messages WHERE consumer_name = 'demo';",
            values.join(", ")
        );
    }
    format!(
        "DROP TABLE IF EXISTS inboxed_demo_ledger;
         DROP TABLE IF EXISTS inboxed_demo_accounts;
         CREATE TABLE inboxed_demo_accounts (id TEXT PRIMARY KEY, balance BIGINT NOT NULL);
         CREATE TABLE inboxed_demo_ledger (message_id TEXT NOT NULL, from_account TEXT NOT NULL,
                                           to_account TEXT NOT NULL, amount BIGINT NOT NULL);
         INSERT INTO inboxed_demo_accounts (id, balance) VALUES {};
         DELETE {demo_keys};
         DELETE FROM inboxed_dead_letters WHERE consumer_name = 'demo';
         DELETE FROM inboxed_attempts WHERE consumer_name = 'demo';
         DELETE FROM inboxed_inbox_messages WHERE consumer_name = 'demo';",
        values.join(", ")
    )
}

/// The id of account `i`.
pub(super) fn account(i: usize) -> String {
    format!("acct-{i:03}")
}

/// One transfer, as the producer sends it.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub(super) struct Transfer {
    pub(super) from: String,
    pub(super) to: String,
    pub(super) amount: i64,
}

/// The handler: debit, credit and a ledger line, in the inbox transaction.
#[derive(Debug, Clone, Copy)]
pub(super) struct Transfers;

macro_rules! transfers_for {
    ($db:ty, $conn:ty, $update:literal, $insert:literal) => {
        impl Handler<$db> for Transfers {
            async fn handle(&self, msg: &Envelope, conn: &mut $conn) -> Result<(), HandlerError> {
                let t: Transfer = msg.json().permanent()?;
                if t.amount <= 0 || t.from == t.to {
                    return Err(HandlerError::permanent(format!("not a transfer: {t:?}")));
                }
                // Update in id order so two transfers over the same pair cannot deadlock.
                let mut legs = [(t.from.as_str(), -t.amount), (t.to.as_str(), t.amount)];
                legs.sort_unstable();
                for (account, delta) in legs {
                    let done = sqlx::query($update)
                        .bind(delta)
                        .bind(account)
                        .execute(&mut *conn)
                        .await?;
                    if done.rows_affected() == 0 {
                        return Err(HandlerError::permanent(format!(
                            "unknown account {account:?}"
                        )));
                    }
                }
                sqlx::query($insert)
                    .bind(msg.id().as_str())
                    .bind(&t.from)
                    .bind(&t.to)
                    .bind(t.amount)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            }
        }
    };
}

transfers_for!(
    sqlx::Postgres,
    sqlx::PgConnection,
    "UPDATE inboxed_demo_accounts SET balance = balance + $1 WHERE id = $2",
    "INSERT INTO inboxed_demo_ledger (message_id, from_account, to_account, amount) VALUES ($1, $2, $3, $4)"
);
transfers_for!(
    sqlx::MySql,
    sqlx::MySqlConnection,
    "UPDATE inboxed_demo_accounts SET balance = balance + ? WHERE id = ?",
    "INSERT INTO inboxed_demo_ledger (message_id, from_account, to_account, amount) VALUES (?, ?, ?, ?)"
);
transfers_for!(
    sqlx::Sqlite,
    sqlx::SqliteConnection,
    "UPDATE inboxed_demo_accounts SET balance = balance + ?1 WHERE id = ?2",
    "INSERT INTO inboxed_demo_ledger (message_id, from_account, to_account, amount) VALUES (?1, ?2, ?3, ?4)"
);
