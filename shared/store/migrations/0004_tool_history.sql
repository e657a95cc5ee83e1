-- Full tool history: besides user and assistant text, a turn stores the assistant messages that asked for tool
-- calls and the tool results, in order, so the next turn's request carries them.
--
-- SQLite cannot widen a CHECK constraint, so the table is rebuilt in place: every existing row keeps its id,
-- session, role, text and time, and reads as the plain text message it was.
--
-- * `tool_calls_json` (assistant rows): the calls the message asked for, a JSON array of
--   `{"id","name","arguments"}` (`arguments` the raw JSON text the model wrote); NULL for a plain answer.
-- * `tool_call_id`, `tool_name` (tool rows): the call the row answers; `content` is the full result.
-- * `turn_id`: the id of the first row the same turn stored; rows written before this migration have none.
CREATE TABLE messages_with_tools (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      TEXT    NOT NULL,
    role            TEXT    NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    content         TEXT    NOT NULL,
    reasoning       TEXT,
    tool_calls_json TEXT,
    tool_call_id    TEXT,
    tool_name       TEXT,
    turn_id         INTEGER,
    created_at      TEXT    NOT NULL,
    CHECK ((role = 'tool') = (tool_call_id IS NOT NULL))
);
INSERT INTO messages_with_tools (id, session_id, role, content, reasoning, created_at)
    SELECT id, session_id, role, content, reasoning, created_at FROM messages;
-- New ids continue after the highest id ever given, as before, so a message id never names two messages.
DELETE FROM sqlite_sequence WHERE name = 'messages_with_tools';
INSERT INTO sqlite_sequence (name, seq) SELECT 'messages_with_tools', seq FROM sqlite_sequence WHERE name = 'messages';
DROP TABLE messages;
ALTER TABLE messages_with_tools RENAME TO messages;
CREATE INDEX ix_messages_session ON messages (session_id, id);
