
CREATE TABLE IF NOT EXISTS budget_reservations (
    id          TEXT PRIMARY KEY,
    day         TEXT NOT NULL,
    usd         REAL NOT NULL CHECK (usd >= 0),
    holder      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_budget_reservations_day ON budget_reservations(day, expires_at);
