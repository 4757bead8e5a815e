-- 0016: PostgreSQL renames its record of the outbox relay's lock-held batches; SQLite's relay
-- holds no batch by its locks (0013), so this version only keeps the numbering the same in
-- every engine.
SELECT 1;
