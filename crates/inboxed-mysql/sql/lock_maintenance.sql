-- lock_maintenance: one process maintains the partitions at a time. Takes, on the maintenance
-- session, a named lock for the table without waiting: 1 when taken, 0 when another session
-- holds it (its pass goes on, this one skips). The lock ends with the session, which the pass
-- closes when it is done, so a dying process's lock goes with its connection. No parameters.
SELECT GET_LOCK(CONCAT('inboxed/', SHA1('{{schema}}.{{prefix}}processed_log/maintenance')), 0)
