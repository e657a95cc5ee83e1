-- The worker that ran the task's latest attempt: its id and the host it announced. NULL until a worker started it.
ALTER TABLE tasks ADD COLUMN worker_id TEXT;
ALTER TABLE tasks ADD COLUMN worker_host TEXT;
