-- 0007: PostgreSQL marks its inbox table with the contract version (docs/inbox-contract.md);
-- SQLite tables take no comments, and its inbox serves one embedded process, so there is
-- nothing to do. Kept so that both backends number their migrations alike.
SELECT 1;
