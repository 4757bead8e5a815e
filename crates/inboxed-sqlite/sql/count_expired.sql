-- count_expired: how many keys of consumer ?1 were received before ?2 (ms since the epoch),
-- counting at most ?3: the dry run's answer, bounded so it cannot read a huge range.
-- ?1 consumer_name, ?2 cut-off (ms), ?3 cap
SELECT count(*) FROM (
    SELECT 1 FROM {{schema}}."{{prefix}}processed_messages"
    WHERE consumer_name = ?1
      AND received_at < strftime('%Y-%m-%dT%H:%M:%fZ', ?2 / 1000.0, 'unixepoch')
    LIMIT ?3
)
