
ALTER TABLE saga_state ADD COLUMN principal TEXT;
CREATE INDEX saga_state_principal ON saga_state (principal, created_at);
CREATE TABLE tokens (
    name          TEXT PRIMARY KEY,
    role          TEXT NOT NULL CHECK (role IN ('client','operator')),
    secret_sha256 TEXT NOT NULL UNIQUE CHECK (length(secret_sha256) = 64),
    created_at    TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    revoked_at    TEXT,
    revoked_by    TEXT
);
CREATE TABLE provider_keys (
    name        TEXT PRIMARY KEY,
    format      TEXT NOT NULL,
    kek_id      TEXT NOT NULL,
    wrapped_dek BYTEA NOT NULL,
    ciphertext  BYTEA NOT NULL,
    last4       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL
);
CREATE TABLE host_switch (
    id     INT PRIMARY KEY CHECK (id = 1),
    mode   TEXT NOT NULL CHECK (mode IN ('running','read_only','paused')),
    set_by TEXT,
    set_at TEXT,
    note   TEXT
);
CREATE TABLE budget_reservations (
    id          TEXT PRIMARY KEY,
    day         TEXT NOT NULL,
    usd         DOUBLE PRECISION NOT NULL CHECK (usd >= 0),
    holder      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX budget_reservations_day ON budget_reservations (day, expires_at);
