-- Full-text search over the transcripts (the web UI's /history): MiniBot's `messages_fts`, an FTS5 table whose
-- content is the `messages` table itself, so the text is stored once.
--
-- Only user and assistant rows are indexed: tool results are large and are not what a person searches their
-- history for. An external-content index must be told exactly what it holds when a row leaves it, so every
-- trigger applies the same condition (`role != 'tool'`) to the old and the new row.
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, content = 'messages', content_rowid = 'id');

CREATE TRIGGER IF NOT EXISTS messages_fts_ai AFTER INSERT ON messages WHEN new.role != 'tool' BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;

CREATE TRIGGER IF NOT EXISTS messages_fts_ad AFTER DELETE ON messages WHEN old.role != 'tool' BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;

-- Only a change of text or role touches the index: archiving a session and stamping turn ids rewrite many rows.
-- One trigger, so the old text leaves the index before the new text enters it under the same rowid.
CREATE TRIGGER IF NOT EXISTS messages_fts_au AFTER UPDATE OF content, role ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) SELECT 'delete', old.id, old.content WHERE old.role != 'tool';
    INSERT INTO messages_fts (rowid, content) SELECT new.id, new.content WHERE new.role != 'tool';
END;

-- The messages stored before this migration.
INSERT INTO messages_fts (rowid, content) SELECT id, content FROM messages WHERE role != 'tool';
