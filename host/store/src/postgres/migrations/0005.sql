
ALTER TABLE saga_state ADD COLUMN scope TEXT;
UPDATE saga_state SET scope = CASE
    WHEN origin = 'plan' THEN 'plan'
    WHEN origin = 'call' THEN 'call'
    WHEN origin = 'mcp' AND released_at IS NOT NULL THEN 'handle'
END;
