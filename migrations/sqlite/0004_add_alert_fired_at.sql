-- When each alert key last fired, for rule cooldowns.
ALTER TABLE alert_state ADD COLUMN last_fired_at TEXT;
