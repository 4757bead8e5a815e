-- 0019: PostgreSQL drops its inbox claim token index and finds a claim's rows by id; SQLite
-- keeps its own, so this version only keeps the numbering the same in every engine.
SELECT 1;
