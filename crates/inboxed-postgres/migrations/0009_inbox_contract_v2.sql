-- 0009: the inbox table follows contract version 2 (docs/inbox-contract.md): the claim also
-- returns message_type, correlation_id and suspect, and the release statement is part of the
-- contract. Nothing in the table changes; the comment is how a worker written in another
-- language checks which version it has. Same template rules as 0001.
COMMENT ON TABLE {{schema}}."{{prefix}}inbox_messages" IS 'inboxed inbox contract v2';
