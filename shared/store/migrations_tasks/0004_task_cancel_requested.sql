-- When the user or the main agent asked for the task's cancel (`cancel_task`). A task that ends `cancelled`
-- with this NULL was stopped by someone else (an operator, a forged control message, a worker on its own), and
-- the chat is told so.
ALTER TABLE tasks ADD COLUMN cancel_requested_at TEXT;
