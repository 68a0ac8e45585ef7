
CREATE TRIGGER IF NOT EXISTS saga_steps_fence_insert BEFORE INSERT ON saga_steps
WHEN NEW.fence IS NOT (SELECT fence FROM saga_state WHERE saga_id = NEW.saga_id)
BEGIN SELECT RAISE(ABORT, 'capsaga: fenced'); END;
CREATE TRIGGER IF NOT EXISTS saga_steps_fence_update BEFORE UPDATE ON saga_steps
WHEN NEW.fence IS NOT (SELECT fence FROM saga_state WHERE saga_id = NEW.saga_id)
BEGIN SELECT RAISE(ABORT, 'capsaga: fenced'); END;
