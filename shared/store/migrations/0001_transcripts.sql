-- Conversation transcripts: only user and assistant text, one row per message.
CREATE TABLE IF NOT EXISTS messages (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT    NOT NULL,
    role        TEXT    NOT NULL CHECK (role IN ('user', 'assistant')),
    content     TEXT    NOT NULL,
    reasoning   TEXT,
    created_at  TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_messages_session ON messages (session_id, id);

-- Turns accepted but not finished. Written before a turn runs, removed when its answer is stored, replayed at
-- start-up after a crash.
CREATE TABLE IF NOT EXISTS pending_turns (
    event_id                TEXT    PRIMARY KEY,
    session_id              TEXT    NOT NULL,
    message_json            TEXT    NOT NULL,
    task_handoff_completed  INTEGER NOT NULL DEFAULT 0,
    created_at              TEXT    NOT NULL
);
