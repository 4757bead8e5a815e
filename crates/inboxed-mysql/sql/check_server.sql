-- check_server: what the inbox needs of a MySQL or MariaDB server, read in one round trip on a
-- connection of the store's pool (the session's values are the ones its transactions run
-- under). No parameters.
--
-- version: SKIP LOCKED (claims) arrived in MySQL 8.0.1 and MariaDB 10.6.
-- innodb_flush_log_at_trx_commit: below 1 a crash loses commits already acknowledged.
-- log_bin, sync_binlog: with the binary log on, a crash can lose from it commits InnoDB kept
--   (MariaDB ships sync_binlog = 0), and a replica promoted later never saw them.
-- sql_mode: without a strict mode a too-long id is truncated with a warning, and a different
--   message that shares the truncated prefix is then taken for a duplicate.
-- default_storage_engine: the migrations name InnoDB; a default of MyISAM elsewhere in the
--   schema would give the business tables no transactions to share with the claim.
SELECT VERSION(),
       CAST(@@GLOBAL.innodb_flush_log_at_trx_commit AS SIGNED),
       CAST(@@GLOBAL.log_bin AS SIGNED),
       CAST(@@GLOBAL.sync_binlog AS SIGNED),
       CAST(@@SESSION.sql_mode AS CHAR),
       CAST(@@SESSION.default_storage_engine AS CHAR)
