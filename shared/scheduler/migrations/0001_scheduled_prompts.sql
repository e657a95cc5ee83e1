-- MiniBot 0.36's table, column for column, so a MiniBot `scheduled_prompts.db` opens as it is and keeps its jobs.
-- Times are UTC text in SQLAlchemy's format (`YYYY-MM-DD HH:MM:SS.ffffff`), which sorts as it reads.
CREATE TABLE IF NOT EXISTS scheduled_prompts (
    id                          VARCHAR(36)  NOT NULL PRIMARY KEY,
    owner_id                    VARCHAR(128) NOT NULL,
    channel                     VARCHAR(32)  NOT NULL,
    chat_id                     BIGINT,
    user_id                     BIGINT,
    role                        VARCHAR(16)  NOT NULL DEFAULT 'user',
    content                     TEXT         NOT NULL,
    status                      VARCHAR(16)  NOT NULL DEFAULT 'pending',
    run_at                      DATETIME     NOT NULL,
    lease_expires_at            DATETIME,
    retry_count                 INTEGER      NOT NULL DEFAULT 0,
    max_attempts                INTEGER      NOT NULL DEFAULT 3,
    metadata                    JSON,
    last_error                  TEXT,
    recurrence                  VARCHAR(16)  NOT NULL DEFAULT 'none',
    recurrence_interval_seconds INTEGER,
    recurrence_cron_expression  VARCHAR(128),
    recurrence_end_at           DATETIME,
    created_at                  DATETIME     NOT NULL,
    updated_at                  DATETIME     NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_scheduled_prompts_owner_id ON scheduled_prompts (owner_id);
CREATE INDEX IF NOT EXISTS ix_scheduled_prompts_status ON scheduled_prompts (status);
CREATE INDEX IF NOT EXISTS ix_scheduled_prompts_run_at ON scheduled_prompts (run_at);
