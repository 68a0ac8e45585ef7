
CREATE TABLE approvals_v3 (
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
    status       TEXT NOT NULL CHECK (status IN ('pending','approved','denied','claimed','stale','expired')),
    decided_by   TEXT,
    decided_at   TEXT,
    claimed_saga TEXT,
    claimed_step INTEGER,
    claimed_at   TEXT,
    created_at   TEXT NOT NULL,
    expires_at   TEXT,
    replaces     TEXT,
    note         TEXT
);
INSERT INTO approvals_v3 (approval_id, saga_id, step_seq, tool_id, tool_hash, args_hash, args, reason, summary, preview, status, decided_by, decided_at, claimed_saga, claimed_step, claimed_at, created_at)
    SELECT approval_id, saga_id, step_seq, tool_id, tool_hash, args_hash, args, reason, summary, preview, status, decided_by, decided_at, claimed_saga, claimed_step, claimed_at, created_at FROM approvals;
DROP TABLE approvals;
ALTER TABLE approvals_v3 RENAME TO approvals;
CREATE INDEX IF NOT EXISTS idx_approvals_binding ON approvals(tool_id, tool_hash, args_hash, status);
CREATE INDEX IF NOT EXISTS idx_approvals_step ON approvals(saga_id, step_seq);
