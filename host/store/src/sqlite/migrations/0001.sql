
CREATE TABLE IF NOT EXISTS saga_state (
    saga_id     TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    origin      TEXT NOT NULL,
    label       TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS saga_steps (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
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
    UNIQUE (saga_id, step_seq)
);
CREATE INDEX IF NOT EXISTS idx_saga ON saga_steps(saga_id, step_seq);
CREATE TABLE IF NOT EXISTS wal_log (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    saga_id    TEXT NOT NULL,
    step_seq   INTEGER,
    record     TEXT NOT NULL,
    detail     TEXT NOT NULL,
    at         TEXT NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_wal_log_saga ON wal_log(saga_id, seq);
CREATE TABLE IF NOT EXISTS traces (
    trace_id       TEXT PRIMARY KEY,
    saga_id        TEXT,
    task           TEXT NOT NULL,
    outcome        TEXT NOT NULL,
    started_at     TEXT NOT NULL,
    finished_at    TEXT,
    wall_ms        INTEGER NOT NULL,
    trace          TEXT NOT NULL
);
