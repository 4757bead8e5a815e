-- 0016: the record of the outbox relay's lock-held batches takes the name of what it holds,
-- batches whose rows are not marked yet (a batch's mark deletes its record; "settle" is a
-- delivery's word). Same template rules as 0001.
ALTER TABLE {{schema}}."{{prefix}}outbox_unsettled" RENAME TO "{{prefix}}outbox_unmarked";
ALTER INDEX {{schema}}."{{prefix}}outbox_unsettled_pkey" RENAME TO "{{prefix}}outbox_unmarked_pkey";
