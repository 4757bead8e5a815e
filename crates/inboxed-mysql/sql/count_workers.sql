-- count_workers: on a worker's liveness connection, every second (it is also the check that the
-- connection lives). No parameters.
--
-- The workers registered on this database's inbox tables, of every consumer: they share the
-- server's cores, so a worker pacing its claim loops takes its share of them (pace.rs). A dead
-- worker counts until the reaper forgets it, a few seconds; an unregistered worker (liveness
-- off, another language) not at all.
SELECT COUNT(*) FROM {{schema}}.`{{prefix}}workers`
