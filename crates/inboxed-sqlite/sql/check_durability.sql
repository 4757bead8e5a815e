-- check_durability: synchronous (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA) and the journal mode.
-- Below FULL a power loss can undo commits SQLite already reported, in WAL mode as well.
-- These pragmas are per connection, so the store sets them on every connection it opens.
SELECT (SELECT synchronous FROM pragma_synchronous) AS synchronous,
       (SELECT journal_mode FROM pragma_journal_mode) AS journal_mode
