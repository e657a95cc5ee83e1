-- What a finished attempt used, as its worker reported it in the terminal event. NULL when no worker reported
-- (a task cancelled or failed by the orchestrator, or one that ended before this migration).
ALTER TABLE tasks ADD COLUMN steps INTEGER;
ALTER TABLE tasks ADD COLUMN tool_calls INTEGER;
ALTER TABLE tasks ADD COLUMN total_tokens INTEGER;
