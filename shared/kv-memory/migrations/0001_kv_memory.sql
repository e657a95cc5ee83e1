-- MiniBot's schema, created only where it is missing: a kv_memory.db that MiniBot (SQLAlchemy) made already has
-- all of it and no migrations table, so every statement must be a no-op there.
CREATE TABLE IF NOT EXISTS kv_memory (
    id VARCHAR(36) NOT NULL PRIMARY KEY,
    owner_id VARCHAR(128) NOT NULL,
    title VARCHAR(100) NOT NULL,
    data TEXT NOT NULL,
    metadata JSON NOT NULL,
    source VARCHAR(256),
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    expires_at DATETIME
);
CREATE INDEX IF NOT EXISTS ix_kv_memory_owner_id ON kv_memory (owner_id);
CREATE INDEX IF NOT EXISTS ix_kv_memory_owner_title_lower ON kv_memory (lower(title), owner_id);

CREATE VIRTUAL TABLE IF NOT EXISTS kv_memory_fts USING fts5(title, data, content='kv_memory', content_rowid='rowid');
CREATE TRIGGER IF NOT EXISTS kv_memory_ai AFTER INSERT ON kv_memory BEGIN
    INSERT INTO kv_memory_fts(rowid, title, data) VALUES (new.rowid, new.title, new.data);
END;
CREATE TRIGGER IF NOT EXISTS kv_memory_ad AFTER DELETE ON kv_memory BEGIN
    INSERT INTO kv_memory_fts(kv_memory_fts, rowid, title, data) VALUES ('delete', old.rowid, old.title, old.data);
END;
