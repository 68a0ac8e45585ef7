
DROP INDEX IF EXISTS idx_saga;
CREATE TABLE wal_log_v10 (
    seq        INTEGER PRIMARY KEY,
    saga_id    TEXT NOT NULL,
    step_seq   INTEGER,
    record     TEXT NOT NULL,
    detail     TEXT NOT NULL,
    at         TEXT NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);
INSERT INTO wal_log_v10 (seq, saga_id, step_seq, record, detail, at, prev_hash, hash)
    SELECT seq, saga_id, step_seq, record, detail, at, prev_hash, hash FROM wal_log;
DROP TABLE wal_log;
ALTER TABLE wal_log_v10 RENAME TO wal_log;
CREATE INDEX idx_wal_log_saga ON wal_log(saga_id, seq);
CREATE TABLE saga_steps_v10 (
    id               INTEGER PRIMARY KEY,
    saga_id          TEXT NOT NULL REFERENCES saga_state(saga_id),
    step_seq         INTEGER NOT NULL,
    tool_id          TEXT NOT NULL,
    tool_hash        TEXT NOT NULL,
    grants           TEXT NOT NULL,
    has_side_effects INTEGER NOT NULL,
    idempotency_key  TEXT NOT NULL UNIQUE,
    args             TEXT NOT NULL,
    preimage         TEXT,
    output           TEXT,
    status           TEXT NOT NULL CHECK (status IN ('BEGIN','COMMIT','FAIL','COMPENSATED','COMPENSATION_FAILED')),
    error            TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    fence            INTEGER NOT NULL DEFAULT 1,
    UNIQUE (saga_id, step_seq)
);
INSERT INTO saga_steps_v10 (id, saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, output, status, error, created_at, updated_at, fence)
    SELECT id, saga_id, step_seq, tool_id, tool_hash, grants, has_side_effects, idempotency_key, args, preimage, output, status, error, created_at, updated_at, fence FROM saga_steps;
DROP TABLE saga_steps;
ALTER TABLE saga_steps_v10 RENAME TO saga_steps;
CREATE INDEX idx_steps_tool_hash ON saga_steps(tool_hash);
