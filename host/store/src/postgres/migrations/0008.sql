
CREATE TABLE mcp_tasks (
    task_id           TEXT PRIMARY KEY,
    principal         TEXT NOT NULL,
    saga_id           TEXT,
    owner             TEXT,
    status            TEXT NOT NULL CHECK (status IN ('working','input_required','completed','failed','cancelled')),
    detail            TEXT,
    answers           TEXT,
    cancel_requested  BOOLEAN NOT NULL DEFAULT FALSE,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    version           BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX mcp_tasks_open ON mcp_tasks (status, owner);
