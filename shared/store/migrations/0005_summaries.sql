-- Compaction: a summary stands in for a chat's messages up to `through_id` when its history is sent to the
-- model. The messages themselves stay, readable by id.
CREATE TABLE IF NOT EXISTS summaries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    through_id INTEGER NOT NULL,
    first_id INTEGER NOT NULL,
    covered INTEGER NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS summaries_by_session ON summaries (session_id, id);
