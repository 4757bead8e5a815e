-- 0009: PostgreSQL marks its inbox table with contract version 2 (docs/inbox-contract.md);
-- SQLite tables take no comments, so there is nothing to do. Kept so that both backends number
-- their migrations alike.
SELECT 1;
