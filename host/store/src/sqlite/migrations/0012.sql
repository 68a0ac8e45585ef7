
CREATE TABLE IF NOT EXISTS budget_ratios (
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    day           TEXT NOT NULL,
    calls         INTEGER NOT NULL DEFAULT 0,
    reserved_usd  REAL NOT NULL DEFAULT 0,
    charged_usd   REAL NOT NULL DEFAULT 0,
    over_usd      REAL NOT NULL DEFAULT 0,
    input_ratio   REAL NOT NULL DEFAULT 0,
    output_ratio  REAL NOT NULL DEFAULT 0,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (provider, model, day)
);
CREATE INDEX IF NOT EXISTS idx_budget_ratios_day ON budget_ratios(day);
