
CREATE TABLE saga_state (
    saga_id     TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    origin      TEXT NOT NULL,
    label       TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    owner       TEXT,
    plan        TEXT,
    fence       BIGINT NOT NULL DEFAULT 1,
    ord         BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX saga_state_unfinished ON saga_state (created_at, ord)
    WHERE state NOT IN ('Done', 'FailedRolledBack', 'FailedRollbackPartial');
CREATE INDEX saga_state_created ON saga_state (created_at, ord);
CREATE TABLE saga_steps (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    saga_id          TEXT NOT NULL REFERENCES saga_state(saga_id),
    step_seq         BIGINT NOT NULL,
    tool_id          TEXT NOT NULL,
    tool_hash        TEXT NOT NULL,
    grants           TEXT NOT NULL,
    has_side_effects BOOLEAN NOT NULL,
    idempotency_key  TEXT NOT NULL UNIQUE,
    args             TEXT NOT NULL,
    preimage         TEXT,
    output           TEXT,
    status           TEXT NOT NULL CHECK (status IN ('BEGIN','COMMIT','FAIL','COMPENSATED','COMPENSATION_FAILED')),
    error            TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    fence            BIGINT NOT NULL,
    UNIQUE (saga_id, step_seq)
);
CREATE INDEX saga_steps_tool_hash ON saga_steps (tool_hash);
CREATE TABLE wal_log (
    seq        BIGINT PRIMARY KEY,
    saga_id    TEXT NOT NULL,
    step_seq   BIGINT,
    record     TEXT NOT NULL,
    detail     TEXT NOT NULL,
    at         TEXT NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL
);
CREATE INDEX wal_log_saga ON wal_log (saga_id, seq);
CREATE TABLE wal_head (
    id    INT PRIMARY KEY CHECK (id = 1),
    seq   BIGINT NOT NULL,
    hash  TEXT NOT NULL
);
CREATE TABLE traces (
    trace_id     TEXT PRIMARY KEY,
    saga_id      TEXT,
    task         TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    started_at   TEXT NOT NULL,
    finished_at  TEXT,
    wall_ms      BIGINT NOT NULL,
    trace        TEXT NOT NULL,
    ord          BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX traces_saga ON traces (saga_id, started_at);
CREATE TABLE approvals (
    approval_id  TEXT PRIMARY KEY,
    saga_id      TEXT NOT NULL REFERENCES saga_state(saga_id),
    step_seq     BIGINT NOT NULL,
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
    claimed_step BIGINT,
    claimed_at   TEXT,
    created_at   TEXT NOT NULL,
    expires_at   TEXT,
    replaces     TEXT,
    note         TEXT,
    ord          BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX approvals_binding ON approvals (tool_id, tool_hash, args_hash, status);
CREATE INDEX approvals_step ON approvals (saga_id, step_seq);
CREATE TABLE neurons (
    name        TEXT NOT NULL,
    version     BIGINT NOT NULL,
    identity    TEXT NOT NULL UNIQUE,
    runner_hash TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('proposed','tested','awaiting_operator','active','retired','rejected')),
    meta        TEXT NOT NULL,
    source      TEXT NOT NULL,
    examples    TEXT NOT NULL,
    report      TEXT,
    granted     TEXT NOT NULL,
    saga_id     TEXT,
    step_seq    BIGINT,
    decided_by  TEXT,
    note        TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE INDEX neurons_status ON neurons (status);
CREATE TABLE budget_days (
    day           TEXT PRIMARY KEY,
    spent_usd     DOUBLE PRECISION NOT NULL DEFAULT 0,
    calls         BIGINT NOT NULL DEFAULT 0,
    input_tokens  BIGINT NOT NULL DEFAULT 0,
    output_tokens BIGINT NOT NULL DEFAULT 0,
    updated_at    TEXT NOT NULL
);
CREATE TABLE hosts (
    owner_id      TEXT PRIMARY KEY,
    started_at    TEXT NOT NULL,
    expires_at    TIMESTAMPTZ NOT NULL,
    policy_sha256 TEXT
);
-- Fencing: a step row written with a token that is not its saga's current
-- one is refused here, whatever the writer believes (SQLSTATE CS409).
CREATE FUNCTION capsaga_check_fence() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    current BIGINT;
BEGIN
    SELECT fence INTO current FROM saga_state WHERE saga_id = NEW.saga_id FOR SHARE;
    IF current IS DISTINCT FROM NEW.fence THEN
        RAISE EXCEPTION 'capsaga: fenced: saga % is at token %, the write carries %',
            NEW.saga_id, current, NEW.fence USING ERRCODE = 'CS409';
    END IF;
    RETURN NEW;
END
$fn$;
CREATE TRIGGER saga_steps_fence BEFORE INSERT OR UPDATE ON saga_steps
    FOR EACH ROW EXECUTE FUNCTION capsaga_check_fence();
