-- capability_lock_try: the start-up probe's second session asks for the lock the first holds;
-- PostgreSQL answers false. An engine that answers true grants advisory locks to every session
-- at once (CockroachDB), and the inbox's key locks would exclude nothing.
-- $1 the probe's key (bigint)
SELECT pg_try_advisory_xact_lock($1)
