
CREATE INDEX IF NOT EXISTS idx_saga_created ON saga_state(created_at);
