-- migrations_applied: the migrations applied so far, to compare with the embedded ones.
SELECT version, checksum FROM {{schema}}.`{{prefix}}migrations` ORDER BY version
