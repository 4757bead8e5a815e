-- gate_enter: on a claim loop's gate session (a connection of its own), before a batch: takes
-- the batch gate's slot $1, waiting at most $2 milliseconds. Returns 1 when taken, 0 when the
-- wait ran out (NULL on an error of the server's).
--
-- One named lock per slot of the database's inbox tables, shared by the workers of every
-- consumer (they share the server's cores): at most as many batches run at once as there are
-- slots (engine/gate.rs says why). A session that ends frees its slot, so a worker that dies
-- holding one holds nothing back. MariaDB waits in fractions of a second; MySQL takes the wait
-- as whole seconds, so there it is rounded up (a wait rounded down to 0 would only try, and
-- the loop would poll the server without pause). A wait of 0 only tries on both.
SELECT GET_LOCK(CONCAT('inboxed/', SHA1(CONCAT('{{schema}}.{{prefix}}gate/', $1))),
                IF(VERSION() LIKE '%MariaDB%', $2 / 1000, CEILING($2 / 1000)))
