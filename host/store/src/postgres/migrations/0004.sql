
ALTER TABLE saga_state ADD COLUMN released_at TEXT;
