-- 0014: the operator's search of payloads by JSON path. PostgreSQL needs a function that reads
-- a payload that is not JSON as NULL; SQLite's json_valid and json_extract read it as it is, so
-- this version only keeps the numbering the same in every engine.
SELECT 1;
