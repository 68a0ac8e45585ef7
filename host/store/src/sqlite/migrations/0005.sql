
CREATE INDEX IF NOT EXISTS idx_saga_principal ON saga_state(principal, created_at);
CREATE TABLE IF NOT EXISTS tokens (
    name          TEXT PRIMARY KEY,
    role          TEXT NOT NULL CHECK (role IN ('client','operator')),
    secret_sha256 TEXT NOT NULL UNIQUE CHECK (length(secret_sha256) = 64),
    created_at    TEXT NOT NULL,
    created_by    TEXT NOT NULL,
    revoked_at    TEXT,
    revoked_by    TEXT
);
CREATE TABLE IF NOT EXISTS provider_keys (
    name        TEXT PRIMARY KEY,
    format      TEXT NOT NULL,
    kek_id      TEXT NOT NULL,
    wrapped_dek BLOB NOT NULL,
    ciphertext  BLOB NOT NULL,
    last4       TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS host_switch (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    mode   TEXT NOT NULL CHECK (mode IN ('running','read_only','paused')),
    set_by TEXT,
    set_at TEXT,
    note   TEXT
);
