
CREATE TABLE IF NOT EXISTS neurons (
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    identity    TEXT NOT NULL UNIQUE,
    runner_hash TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('proposed','tested','awaiting_operator','active','retired','rejected')),
    meta        TEXT NOT NULL,
    source      TEXT NOT NULL,
    examples    TEXT NOT NULL,
    report      TEXT,
    granted     TEXT NOT NULL,
    saga_id     TEXT,
    step_seq    INTEGER,
    decided_by  TEXT,
    note        TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE INDEX IF NOT EXISTS idx_neurons_status ON neurons(status);
CREATE INDEX IF NOT EXISTS idx_steps_tool_hash ON saga_steps(tool_hash);
