-- create_partitions: partitioned mode. Creates the partition holding now() and the next $2,
-- each $1 seconds long (the function from migration 5). Returns how many were created.
-- $1 partition length (seconds), $2 partitions ahead
--
-- Run at migration and by every purge pass, well before the last partition fills: a key whose
-- received_s has no partition cannot be claimed (the message is requeued, not lost).
SELECT {{schema}}."{{prefix}}processed_log_create"($1, $2)
