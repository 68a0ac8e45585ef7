
ALTER TABLE saga_steps ADD COLUMN label TEXT;
