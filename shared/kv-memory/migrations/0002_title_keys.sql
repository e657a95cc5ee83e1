-- Case-insensitive matching that SQLite's ASCII-only lower() cannot do: the store writes the Unicode-lowercased
-- (NFC) title and data here, and fills them in for rows written without them (MiniBot's) each time it opens.
ALTER TABLE kv_memory ADD COLUMN title_key TEXT;
ALTER TABLE kv_memory ADD COLUMN data_key TEXT;

-- Not unique: MiniBot never enforced its rule in the database, so an old file may hold titles that differ only
-- in case, and every one of them must survive. New duplicates are refused in the write transaction instead.
CREATE INDEX IF NOT EXISTS ix_kv_memory_owner_title_key ON kv_memory (owner_id, title_key);
-- Covers the listing without a query: its count reads the index alone (owner, order, expiry), not 100,000 rows.
CREATE INDEX IF NOT EXISTS ix_kv_memory_owner_updated ON kv_memory (owner_id, updated_at, expires_at);
CREATE INDEX IF NOT EXISTS ix_kv_memory_expires_at ON kv_memory (expires_at) WHERE expires_at IS NOT NULL;

-- MiniBot re-indexed every row on any update; only the indexed columns matter (filling the keys in above and at
-- each open would otherwise rewrite the whole index).
DROP TRIGGER IF EXISTS kv_memory_au;
CREATE TRIGGER kv_memory_au AFTER UPDATE OF title, data ON kv_memory BEGIN
    INSERT INTO kv_memory_fts(kv_memory_fts, rowid, title, data) VALUES ('delete', old.rowid, old.title, old.data);
    INSERT INTO kv_memory_fts(rowid, title, data) VALUES (new.rowid, new.title, new.data);
END;

-- MiniBot rebuilt the index at every start; once here brings an old file's index in line with its rows.
INSERT INTO kv_memory_fts(kv_memory_fts) VALUES ('rebuild');
