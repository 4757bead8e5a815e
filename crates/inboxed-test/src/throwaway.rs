//! A PostgreSQL server of a test's own, made with the local `initdb` in a temporary directory on
//! a free port, so that a test can crash and restart it without touching anyone else's
//! database. As root, the server runs as the `postgres` user (initdb refuses root).

use std::path::PathBuf;
use std::process::Command;

/// A throwaway PostgreSQL cluster; stopped (immediately) when dropped.
#[derive(Debug)]
pub struct ThrowawayPg {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// Server settings beyond the port and socket directory (`-c name=value ...`).
    options: String,
}

impl ThrowawayPg {
    /// Creates and starts the cluster.
    ///
    /// # Panics
    /// When no PostgreSQL binaries are installed, or the cluster does not start.
    #[must_use]
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// A cluster that also accepts TLS, presenting `ca`'s server certificate (for
    /// `localhost`); clients choose TLS with `sslmode`.
    ///
    /// # Panics
    /// As [`ThrowawayPg::start`].
    #[must_use]
    pub fn start_tls(ca: &crate::tls::TestCa) -> Self {
        Self::start_with(Some(ca))
    }

    /// A streaming standby of `primary`, made with `pg_basebackup -R` and started: it
    /// replicates as `name` (its `application_name`, what `synchronous_standby_names` lists).
    ///
    /// # Panics
    /// When the base backup or the start fails.
    #[must_use]
    pub fn standby_of(primary: &Self, name: &str) -> Self {
        let pg = Self::empty();
        let made = pg.as_owner(&format!(
            "{}/pg_basebackup -D {dir}/data -R -X stream \
             -d 'host=127.0.0.1 port={port} user=postgres application_name={name}' \
             >{dir}/basebackup.log 2>&1",
            pg.bin.display(),
            dir = pg.path(),
            port = primary.port,
        ));
        assert!(
            made,
            "pg_basebackup failed; see {}/basebackup.log",
            pg.path()
        );
        pg.restart();
        pg
    }

    /// Makes the standby replicating as `name` synchronous on this primary
    /// (`synchronous_standby_names`), waiting until the primary reports it so.
    ///
    /// # Panics
    /// When the setting fails or the standby is not synchronous within 10 s.
    pub async fn synchronous(&self, name: &str) {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect(&self.url())
            .await
            .expect("connect to the primary");
        // Two statements: ALTER SYSTEM refuses a transaction block, which one query of two is.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{name}'"
        )))
        .execute(&pool)
        .await
        .expect("synchronous_standby_names");
        sqlx::query("SELECT pg_reload_conf()")
            .execute(&pool)
            .await
            .expect("reload");
        for _ in 0..200 {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_replication \
                 WHERE application_name = $1 AND sync_state = 'sync'",
            )
            .bind(name)
            .fetch_one(&pool)
            .await
            .expect("pg_stat_replication");
            if n == 1 {
                pool.close().await;
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("the standby {name} did not become synchronous within 10 s");
    }

    /// Promotes a standby to a primary, waiting until it is one.
    ///
    /// # Panics
    /// When the promotion fails.
    pub fn promote(&self) {
        let promoted = self.as_owner(&format!(
            "{}/pg_ctl -D {}/data -w promote >/dev/null",
            self.bin.display(),
            self.path()
        ));
        assert!(
            promoted,
            "pg_ctl promote failed; see {}/server.log",
            self.path()
        );
    }

    /// A new directory and port, with the newest installed binaries; no cluster yet.
    fn empty() -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL binaries under /usr/lib/postgresql")
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("initdb").exists())
            .max()
            .expect("an initdb under /usr/lib/postgresql/*/bin");
        let dir = tempfile::tempdir().expect("temporary directory");
        let pg = Self {
            dir,
            bin,
            port: crate::free_port(),
            options: String::new(),
        };
        if is_root() {
            run("chown", &["-R", "postgres", &pg.path()]);
        }
        pg
    }

    fn start_with(ca: Option<&crate::tls::TestCa>) -> Self {
        let mut pg = Self::empty();
        if let Some(ca) = ca {
            // The server reads its key only when it is private to the server's user.
            for (from, to) in [
                (ca.cert_file(), "server.pem"),
                (ca.key_file(), "server.key"),
            ] {
                std::fs::copy(from, pg.dir.path().join(to)).unwrap();
            }
            run("chmod", &["600", &format!("{}/server.key", pg.path())]);
            if is_root() {
                run("chown", &["-R", "postgres", &pg.path()]);
            }
            pg.options = format!(
                " -c ssl=on -c ssl_cert_file={dir}/server.pem -c ssl_key_file={dir}/server.key",
                dir = pg.path()
            );
        }
        let made = pg.as_owner(&format!(
            "{}/initdb -D {}/data -A trust -U postgres >{}/initdb.log 2>&1",
            pg.bin.display(),
            pg.path(),
            pg.path()
        ));
        assert!(made, "initdb failed; see {}/initdb.log", pg.path());
        pg.restart();
        pg
    }

    /// Restarts the server listening on `address` too, and trusting clients of `network` (a
    /// CIDR): for clients in other network namespaces ([`crate::netns`]).
    ///
    /// # Panics
    /// When `pg_hba.conf` cannot be written or the server does not start again.
    pub fn open_to(&mut self, address: &str, network: &str) {
        use std::io::Write;
        let hba = self.dir.path().join("data/pg_hba.conf");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&hba)
            .and_then(|mut f| writeln!(f, "host all all {network} trust"))
            .expect("pg_hba.conf");
        self.options
            .push_str(&format!(" -c listen_addresses=127.0.0.1,{address}"));
        let _ = self.as_owner(&format!(
            "{}/pg_ctl -D {}/data -m fast -w stop >/dev/null 2>&1",
            self.bin.display(),
            self.path()
        ));
        self.restart();
    }

    /// The server's port on 127.0.0.1.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's URL (database `postgres`).
    #[must_use]
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's URL at `host` (`localhost` is the name on a TLS cluster's certificate),
    /// with `query` (`sslmode=verify-full&sslrootcert=...`).
    #[must_use]
    pub fn url_at(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{query}", self.port)
    }

    /// Kills the server as a crash would (`pg_ctl stop -m immediate`: no checkpoint, recovery
    /// from the WAL at the next start).
    pub fn crash(&self) {
        // Fails harmlessly when the server is already down (a drop after a crash).
        let _ = self.as_owner(&format!(
            "{}/pg_ctl -D {}/data -m immediate stop >/dev/null 2>&1",
            self.bin.display(),
            self.path()
        ));
    }

    /// Starts the server (again), waiting until it accepts connections.
    ///
    /// # Panics
    /// When the server does not start.
    pub fn restart(&self) {
        let started = self.as_owner(&format!(
            "{}/pg_ctl -D {dir}/data -o '-p {port} -k {dir} -c listen_addresses=127.0.0.1{options}' \
             -l {dir}/server.log -w start >/dev/null",
            self.bin.display(),
            dir = self.path(),
            port = self.port,
            options = self.options
        ));
        assert!(
            started,
            "PostgreSQL did not start; see {}/server.log",
            self.path()
        );
    }

    fn path(&self) -> String {
        self.dir.path().display().to_string()
    }

    /// Runs `script` as the cluster's owner; whether it succeeded.
    fn as_owner(&self, script: &str) -> bool {
        let status = if is_root() {
            Command::new("su")
                .args(["postgres", "-s", "/bin/sh", "-c", script])
                .status()
        } else {
            Command::new("sh").args(["-c", script]).status()
        };
        status.is_ok_and(|s| s.success())
    }
}

impl Drop for ThrowawayPg {
    fn drop(&mut self) {
        self.crash();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(status.success(), "{program} {args:?} failed: {status}");
}
