-- notify: SQLite has no notifications; workers poll. Never executed.
SELECT 1
