-- clear_attempts: forgets a key's attempt counter inside the transaction that settles it, and
-- checks that this transaction is still the one the store began.
-- $1 consumer_name, $2 message_id
--
-- The check: every transaction the store begins sets the savepoint `inboxed_settle` (its
-- begin). InnoDB rolls a deadlock victim's whole transaction back, claim and savepoint
-- included, and a handler that swallowed the error carries on outside any transaction.
-- Releasing the savepoint then fails with 1305, which the store reports as TransactionEnded,
-- and the processor does not commit or ack: the message comes back and runs whole. (What
-- the handler wrote after the deadlock committed on its own: MySQL has no aborted state
-- that would refuse it, and a session with autocommit off, which would hold it back, is
-- silent loss for anyone sharing a pool that does not reset it.) Released first (it writes
-- nothing), then the delete, in one round trip; a transaction settles once.
--! one round trip
RELEASE SAVEPOINT inboxed_settle;
DELETE FROM {{schema}}.`{{prefix}}attempts`
WHERE consumer_name = $1 AND message_id = $2
