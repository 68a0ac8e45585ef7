
CREATE SEQUENCE wal_order AS BIGINT;
SELECT setval('wal_order', GREATEST(MAX(seq), 1), MAX(seq) IS NOT NULL) FROM wal_log;
ALTER TABLE wal_log ADD COLUMN chain TEXT NOT NULL DEFAULT '';
ALTER TABLE wal_log ALTER COLUMN chain DROP DEFAULT;
CREATE INDEX wal_log_chain ON wal_log (chain, seq);
CREATE TABLE wal_chains (
    chain      TEXT PRIMARY KEY,
    seq        BIGINT NOT NULL,
    hash       TEXT NOT NULL,
    opened_at  TEXT NOT NULL
);
INSERT INTO wal_chains (chain, seq, hash, opened_at)
    SELECT '', seq, hash, '' FROM wal_head WHERE seq > 0;
DROP TABLE wal_head;
