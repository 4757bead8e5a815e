-- capability_lock_hold: the start-up probe's first session takes an advisory lock of its own
-- key and holds it (its transaction is rolled back after the probe). capabilities.rs says why.
-- $1 the probe's key (bigint)
SELECT pg_advisory_xact_lock($1)
