
CREATE TABLE budget_ratios (
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    day           TEXT NOT NULL,
    calls         BIGINT NOT NULL DEFAULT 0,
    reserved_usd  DOUBLE PRECISION NOT NULL DEFAULT 0,
    charged_usd   DOUBLE PRECISION NOT NULL DEFAULT 0,
    over_usd      DOUBLE PRECISION NOT NULL DEFAULT 0,
    input_ratio   DOUBLE PRECISION NOT NULL DEFAULT 0,
    output_ratio  DOUBLE PRECISION NOT NULL DEFAULT 0,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (provider, model, day)
);
CREATE INDEX budget_ratios_day ON budget_ratios (day);
