-- minibot-rs additions.
--
-- A cron job's IANA time zone (NULL: UTC, MiniBot's only zone).
ALTER TABLE scheduled_prompts ADD COLUMN recurrence_time_zone TEXT;
-- Due jobs are found by status and time together.
CREATE INDEX IF NOT EXISTS ix_scheduled_prompts_due ON scheduled_prompts (status, run_at);

-- One row per firing of a job, written in the same transaction that moves the job on (to its next run, or to
-- `leased` for a one-off): the job cannot fire twice for one slot, and a crash after the commit loses nothing,
-- because the row stays until the chat's store has taken the turn. `claimed_by` is the process delivering it;
-- `lease_until` is when another process may take it over (also the next try after a failed delivery).
CREATE TABLE IF NOT EXISTS scheduled_fires (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id      VARCHAR(36) NOT NULL,
    due_at      DATETIME    NOT NULL,
    fired_at    DATETIME    NOT NULL,
    claimed_by  TEXT,
    lease_until DATETIME    NOT NULL,
    attempts    INTEGER     NOT NULL DEFAULT 0,
    last_error  TEXT
);
CREATE INDEX IF NOT EXISTS ix_scheduled_fires_lease ON scheduled_fires (lease_until);
CREATE INDEX IF NOT EXISTS ix_scheduled_fires_job ON scheduled_fires (job_id);

-- This database's identity: delivered fires are recorded in the chat store under it, so a fire is recognised
-- when it is delivered twice, and a new scheduler database (ids from 1 again) is never mistaken for the old one.
CREATE TABLE IF NOT EXISTS scheduler_identity (
    only_row INTEGER PRIMARY KEY CHECK (only_row = 1),
    id       TEXT NOT NULL
);
INSERT OR IGNORE INTO scheduler_identity (only_row, id) VALUES (1, lower(hex(randomblob(16))));

-- A MiniBot job left `leased` by a crash has no fire row here; MiniBot would have fired it again once its lease
-- ran out, so it is due again.
UPDATE scheduled_prompts SET status = 'pending', lease_expires_at = NULL WHERE status = 'leased';
