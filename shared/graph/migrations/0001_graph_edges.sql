-- MiniBot's `graph_edges` table, column for column and index for index, so a graph.db that MiniBot created
-- opens unchanged: IF NOT EXISTS everywhere, no primary key (MiniBot has none; SQLite's rowid orders rows).
-- Timestamps are UTC text as SQLAlchemy writes them (`2025-01-31 09:30:00.123456`), so old and new rows sort
-- together.
CREATE TABLE IF NOT EXISTS graph_edges (
    graph       VARCHAR(64)  NOT NULL,
    owner_id    VARCHAR(128) NOT NULL,
    source      VARCHAR(256) NOT NULL,
    rel         VARCHAR(128) NOT NULL,
    target      VARCHAR(256) NOT NULL,
    attrs       TEXT,
    valid_from  DATETIME     NOT NULL,
    valid_to    DATETIME
);
CREATE INDEX IF NOT EXISTS ix_graph_edges_source ON graph_edges (graph, owner_id, source);
CREATE INDEX IF NOT EXISTS ix_graph_edges_target ON graph_edges (graph, owner_id, target);
-- One live edge per triple: two identical links a moment apart update one row instead of inserting two.
CREATE UNIQUE INDEX IF NOT EXISTS ux_graph_edges_active
    ON graph_edges (graph, owner_id, source, rel, target) WHERE valid_to IS NULL;
