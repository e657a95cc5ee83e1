-- Task records, owned by the orchestrator: what was asked, where it stands, how it ended.
CREATE TABLE IF NOT EXISTS tasks (
    id                 TEXT    PRIMARY KEY,
    owner_id           TEXT    NOT NULL,
    channel            TEXT    NOT NULL,
    chat_id            INTEGER,
    user_id            INTEGER,
    prompt             TEXT    NOT NULL,
    agent_name         TEXT,
    context_json       TEXT,
    model_overrides    TEXT    NOT NULL DEFAULT '{}',
    delivery           TEXT    NOT NULL,          -- 'spawn' (answer to the chat) or 'delegate' (new turn)
    continuation_depth INTEGER NOT NULL DEFAULT 0,
    origin_turn_id     TEXT,
    status             TEXT    NOT NULL,          -- pending, running, done, failed, cancelled, timed_out
    attempts           INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL,
    timeout_seconds    INTEGER NOT NULL,
    max_steps          INTEGER,
    max_tool_calls     INTEGER,
    progress           TEXT    NOT NULL DEFAULT '{}',
    result_text        TEXT,
    stop_reason        TEXT,
    last_error         TEXT,
    started_at         TEXT,
    completed_at       TEXT,
    created_at         TEXT    NOT NULL,
    updated_at         TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_tasks_owner_updated ON tasks (owner_id, updated_at);
CREATE INDEX IF NOT EXISTS ix_tasks_status ON tasks (status);

CREATE TABLE IF NOT EXISTS task_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id     TEXT    NOT NULL,
    event_type  TEXT    NOT NULL,
    payload     TEXT    NOT NULL DEFAULT '{}',
    created_at  TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_task_events_task ON task_events (task_id, id);
