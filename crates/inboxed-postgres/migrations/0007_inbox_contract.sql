-- 0007: marks the inbox table with the version of its contract (docs/inbox-contract.md), so a
-- worker written in another language can check, with obj_description, that the table is the
-- one it was written against. Same template rules as 0001.
COMMENT ON TABLE {{schema}}."{{prefix}}inbox_messages" IS 'inboxed inbox contract v1';
