
CREATE TABLE IF NOT EXISTS approvals (
    approval_id  TEXT PRIMARY KEY,
    saga_id      TEXT NOT NULL REFERENCES saga_state(saga_id),
    step_seq     INTEGER NOT NULL,
    tool_id      TEXT NOT NULL,
    tool_hash    TEXT NOT NULL,
    args_hash    TEXT NOT NULL,
    args         TEXT NOT NULL,
    reason       TEXT NOT NULL,
    summary      TEXT NOT NULL,
    preview      TEXT,
    status       TEXT NOT NULL CHECK (status IN ('pending','approved','denied','claimed')),
    decided_by   TEXT,
    decided_at   TEXT,
    claimed_saga TEXT,
    claimed_step INTEGER,
    claimed_at   TEXT,
    created_at   TEXT NOT NULL,
    UNIQUE (saga_id, step_seq)
);
CREATE INDEX IF NOT EXISTS idx_approvals_binding ON approvals(tool_id, tool_hash, args_hash, status);
CREATE TABLE IF NOT EXISTS wal_head (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    seq   INTEGER NOT NULL,
    hash  TEXT NOT NULL
);
INSERT OR IGNORE INTO wal_head (id, seq, hash)
    SELECT 1, seq, hash FROM wal_log ORDER BY seq DESC LIMIT 1;
