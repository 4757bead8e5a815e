-- gate_leave: on the gate session that took slot $1 (gate_enter.sql), after the batch: frees
-- the slot for the next loop waiting on it.
DO RELEASE_LOCK(CONCAT('inboxed/', SHA1(CONCAT('{{schema}}.{{prefix}}gate/', $1))))
