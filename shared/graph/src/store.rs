//! [`GraphStore`]: the `graph_edges` table and the six operations on it.

use crate::{
    Edge, Found, GraphError, Linked, Merged, NeighborQuery, Neighborhood, PathFound, Result, Scope, Unlinked, ids,
    traverse,
};
use serde_json::{Map, Value};
use sqlx::sqlite::SqlitePool;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use tokio::sync::OnceCell;

type Row = (String, String, String, Option<String>, String, Option<String>);

const COLUMNS: &str = "source, rel, target, attrs, valid_from, valid_to";

/// The relation graph in one SQLite file. The file is opened (and migrated) by the first call, so a turn that
/// never touches the graph costs nothing; a file that cannot be opened fails that call, with its path.
pub struct GraphStore {
    path: PathBuf,
    pool: OnceCell<SqlitePool>,
}

impl GraphStore {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), pool: OnceCell::new() }
    }

    /// The database file.
    pub fn file(&self) -> &Path {
        &self.path
    }

    async fn pool(&self) -> Result<&SqlitePool> {
        self.pool
            .get_or_try_init(|| async {
                let pool = minibot_sqlite::open_pool(&self.path, 2).await?;
                minibot_sqlite::migrate(&pool, &sqlx::migrate!("./migrations"))
                    .await
                    .map_err(|source| GraphError::Migrate { path: self.path.clone(), source })?;
                Ok(pool)
            })
            .await
    }

    /// Closes the pool if it was opened. Call it before the tokio runtime stops (see [`minibot_sqlite`]).
    pub async fn close(&self) {
        if let Some(pool) = self.pool.get() {
            pool.close().await;
        }
    }

    /// Creates the live edge, or replaces the attrs of the live edge with the same triple.
    pub async fn link(
        &self,
        scope: Scope<'_>,
        source: &str,
        rel: &str,
        target: &str,
        attrs: Option<Map<String, Value>>,
    ) -> Result<Linked> {
        let (source, rel, target) = (ids::node(source)?, ids::rel(rel)?, ids::node(target)?);
        let attrs = attrs.filter(|a| !a.is_empty()).map(Value::Object);
        let now = now();
        let stored: String = sqlx::query_scalar(
            "INSERT INTO graph_edges (graph, owner_id, source, rel, target, attrs, valid_from, valid_to) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL) \
             ON CONFLICT (graph, owner_id, source, rel, target) WHERE valid_to IS NULL \
             DO UPDATE SET attrs = excluded.attrs \
             RETURNING valid_from",
        )
        .bind(scope.graph)
        .bind(scope.owner_id)
        .bind(&source)
        .bind(&rel)
        .bind(&target)
        .bind(attrs.as_ref().map(Value::to_string))
        .bind(&now)
        .fetch_one(self.pool().await?)
        .await?;
        // Only an insert stores the time just taken.
        let created = stored == now;
        let edge = Edge { source, rel, target, attrs, valid_from: Some(iso(&stored)), valid_to: None };
        Ok(Linked { created, edge })
    }

    /// Closes the live edge: it stays as history, with `valid_to` now.
    pub async fn unlink(&self, scope: Scope<'_>, source: &str, rel: &str, target: &str) -> Result<Unlinked> {
        let (source, rel, target) = (ids::node(source)?, ids::rel(rel)?, ids::node(target)?);
        let done = sqlx::query(
            "UPDATE graph_edges SET valid_to = ?6 WHERE graph = ?1 AND owner_id = ?2 AND source = ?3 AND rel = ?4 \
             AND target = ?5 AND valid_to IS NULL",
        )
        .bind(scope.graph)
        .bind(scope.owner_id)
        .bind(&source)
        .bind(&rel)
        .bind(&target)
        .bind(now())
        .execute(self.pool().await?)
        .await?;
        Ok(Unlinked { closed: done.rows_affected() > 0 })
    }

    /// Rewrites every edge that mentions `source` to mention `target` instead. A live edge that would repeat a
    /// live edge `target` already has is dropped (the canonical one keeps its attrs and dates); closed edges
    /// are only re-keyed, since separate past intervals stay meaningful.
    pub async fn merge(&self, scope: Scope<'_>, source: &str, target: &str) -> Result<Merged> {
        let (source, target) = (ids::node(source)?, ids::node(target)?);
        if source == target {
            return Err(GraphError::invalid(format!("source and target are the same node ({source})")));
        }
        // Reads and writes that decide together: take the write lock first, so a concurrent link cannot slip in.
        let mut tx = self.pool().await?.begin_with("BEGIN IMMEDIATE").await?;
        let live: Vec<Row> = sqlx::query_as(
            "SELECT source, rel, target, attrs, valid_from, valid_to FROM graph_edges \
             WHERE graph = ?1 AND owner_id = ?2 AND valid_to IS NULL",
        )
        .bind(scope.graph)
        .bind(scope.owner_id)
        .fetch_all(&mut *tx)
        .await?;
        let mut canonical: HashSet<(String, String, String)> = live
            .iter()
            .filter(|r| r.0 != source && r.2 != source)
            .map(|r| (r.0.clone(), r.1.clone(), r.2.clone()))
            .collect();
        let mut affected: Vec<&Row> = live.iter().filter(|r| r.0 == source || r.2 == source).collect();
        // Oldest first: when two rewritten edges collide, the older one survives.
        affected.sort_by(|a, b| (&a.4, &a.0, &a.1, &a.2).cmp(&(&b.4, &b.0, &b.1, &b.2)));
        let (mut rekeyed, mut discarded) = (0, 0);
        for row in affected {
            let new_source = if row.0 == source { target.clone() } else { row.0.clone() };
            let new_target = if row.2 == source { target.clone() } else { row.2.clone() };
            let key = (new_source, row.1.clone(), new_target);
            let filter = "WHERE graph = ?1 AND owner_id = ?2 AND source = ?3 AND rel = ?4 AND target = ?5 \
                          AND valid_to IS NULL";
            if canonical.contains(&key) {
                let done = sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM graph_edges {filter}")))
                    .bind(scope.graph)
                    .bind(scope.owner_id)
                    .bind(&row.0)
                    .bind(&row.1)
                    .bind(&row.2)
                    .execute(&mut *tx)
                    .await?;
                discarded += done.rows_affected();
                continue;
            }
            let done =
                sqlx::query(sqlx::AssertSqlSafe(format!("UPDATE graph_edges SET source = ?6, target = ?7 {filter}")))
                    .bind(scope.graph)
                    .bind(scope.owner_id)
                    .bind(&row.0)
                    .bind(&row.1)
                    .bind(&row.2)
                    .bind(&key.0)
                    .bind(&key.2)
                    .execute(&mut *tx)
                    .await?;
            rekeyed += done.rows_affected();
            canonical.insert(key);
        }
        let history = sqlx::query(
            "UPDATE graph_edges SET \
             source = CASE WHEN source = ?3 THEN ?4 ELSE source END, \
             target = CASE WHEN target = ?3 THEN ?4 ELSE target END \
             WHERE graph = ?1 AND owner_id = ?2 AND valid_to IS NOT NULL AND (source = ?3 OR target = ?3)",
        )
        .bind(scope.graph)
        .bind(scope.owner_id)
        .bind(&source)
        .bind(&target)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(Merged {
            merged: source,
            into: target,
            edges_rewritten: rekeyed + history,
            active_duplicates_discarded: discarded,
            history_edges_rekeyed: history,
        })
    }

    /// The nodes within `depth` hops of `node` (nearest first, at most `max_nodes`), the live edges among them
    /// (at most `limit`), and with `history` the closed edges touching them (newest first, at most `limit`).
    pub async fn neighbors(&self, scope: Scope<'_>, query: &NeighborQuery) -> Result<Neighborhood> {
        let node = ids::node(&query.node)?;
        let rel = query.rel.as_deref().map(ids::rel).transpose()?;
        let live = self.live_edges(scope, rel.as_deref()).await?;
        if !traverse::contains(&live, &node) {
            return Ok(Neighborhood {
                node,
                found: false,
                nodes: Vec::new(),
                edges: Vec::new(),
                history: Vec::new(),
                truncated: false,
            });
        }
        let mut reached = traverse::distances(&live, &node, query.direction, query.depth);
        reached.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        let truncated = reached.len() > query.max_nodes;
        let nodes: Vec<String> = reached.into_iter().take(query.max_nodes).map(|(n, _)| n).collect();
        let inside: HashSet<&str> = nodes.iter().map(String::as_str).collect();
        let edges: Vec<Edge> = live
            .iter()
            .filter(|e| inside.contains(e.source.as_str()) && inside.contains(e.target.as_str()))
            .take(query.limit)
            .cloned()
            .collect();
        let history = if query.history {
            self.closed_edges(scope)
                .await?
                .into_iter()
                .filter(|e| inside.contains(e.source.as_str()) || inside.contains(e.target.as_str()))
                .take(query.limit)
                .collect()
        } else {
            Vec::new()
        };
        Ok(Neighborhood { node, found: true, nodes, edges, history, truncated })
    }

    /// The shortest chain of live edges between two nodes, each walked either way.
    pub async fn path(&self, scope: Scope<'_>, source: &str, target: &str, max_depth: usize) -> Result<PathFound> {
        let (source, target) = (ids::node(source)?, ids::node(target)?);
        let live = self.live_edges(scope, None).await?;
        let not_found = |reason: String| PathFound { found: false, reason: Some(reason), nodes: vec![], hops: vec![] };
        let missing: Vec<&str> =
            [&source, &target].into_iter().filter(|n| !traverse::contains(&live, n)).map(String::as_str).collect();
        if !missing.is_empty() {
            return Ok(not_found(format!("unknown node(s): {}", missing.join(", "))));
        }
        let Some(nodes) = traverse::shortest_path(&live, &source, &target) else {
            return Ok(not_found("no path".into()));
        };
        if nodes.len() - 1 > max_depth {
            return Ok(not_found(format!("shortest path is longer than max_depth={max_depth}")));
        }
        let hops = traverse::hops(&live, &nodes);
        Ok(PathFound { found: true, reason: None, nodes, hops })
    }

    /// Edges whose source, relation or target contains the query (as an id would be written), newest first.
    pub async fn search(&self, scope: Scope<'_>, query: &str, limit: usize, history: bool) -> Result<Found> {
        let pattern = ids::like_pattern(&ids::search_fragment(query)?);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT source, rel, target, attrs, valid_from, valid_to FROM graph_edges \
             WHERE graph = ?1 AND owner_id = ?2 \
             AND (source LIKE ?3 ESCAPE '\\' OR rel LIKE ?3 ESCAPE '\\' OR target LIKE ?3 ESCAPE '\\') \
             AND (?4 OR valid_to IS NULL) \
             ORDER BY valid_from DESC, rowid DESC LIMIT ?5",
        )
        .bind(scope.graph)
        .bind(scope.owner_id)
        .bind(&pattern)
        .bind(history)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(self.pool().await?)
        .await?;
        Ok(Found { query: query.to_string(), edges: rows.into_iter().map(edge).collect() })
    }

    /// The namespace's live edges in the order they were written, optionally of one relation.
    async fn live_edges(&self, scope: Scope<'_>, rel: Option<&str>) -> Result<Vec<Edge>> {
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM graph_edges WHERE graph = ?1 AND owner_id = ?2 AND valid_to IS NULL \
             AND (?3 IS NULL OR rel = ?3) ORDER BY rowid"
        )))
        .bind(scope.graph)
        .bind(scope.owner_id)
        .bind(rel)
        .fetch_all(self.pool().await?)
        .await?;
        Ok(rows.into_iter().map(edge).collect())
    }

    /// The namespace's closed edges, most recently closed first.
    async fn closed_edges(&self, scope: Scope<'_>) -> Result<Vec<Edge>> {
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {COLUMNS} FROM graph_edges WHERE graph = ?1 AND owner_id = ?2 AND valid_to IS NOT NULL \
             ORDER BY valid_to DESC, rowid DESC"
        )))
        .bind(scope.graph)
        .bind(scope.owner_id)
        .fetch_all(self.pool().await?)
        .await?;
        Ok(rows.into_iter().map(edge).collect())
    }
}

fn edge((source, rel, target, attrs, valid_from, valid_to): Row) -> Edge {
    // A row MiniBot wrote holds JSON text; anything unreadable or empty is left out rather than failing the call.
    let attrs = attrs
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .filter(|v| !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty()));
    Edge { source, rel, target, attrs, valid_from: Some(iso(&valid_from)), valid_to: valid_to.as_deref().map(iso) }
}

fn now() -> String {
    minibot_sqlite::stored_time::to_text(chrono::Utc::now())
}

/// A stored time as ISO 8601 with its UTC offset (`2025-01-31T09:30:00.123456+00:00`, as MiniBot reports it).
/// Text that is not a time is shown as stored.
fn iso(stored: &str) -> String {
    match minibot_sqlite::stored_time::from_text(stored) {
        Some(time) => format!("{}+00:00", time.format("%Y-%m-%dT%H:%M:%S%.6f")),
        None => stored.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Direction;

    const SCOPE: Scope<'static> = Scope { graph: "memory", owner_id: "me" };

    fn query(node: &str) -> NeighborQuery {
        NeighborQuery {
            node: node.into(),
            direction: Direction::Out,
            depth: 1,
            rel: None,
            history: false,
            limit: 50,
            max_nodes: 100,
        }
    }

    #[tokio::test]
    async fn a_minibot_database_opens_without_losing_a_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("graph.db");
        // The schema as SQLAlchemy's CreateTable/CreateIndex emit it, and a row as MiniBot writes it.
        let pool = minibot_sqlite::open_pool(&path, 1).await.unwrap();
        for statement in [
            "CREATE TABLE graph_edges (graph VARCHAR(64) NOT NULL, owner_id VARCHAR(128) NOT NULL, \
             source VARCHAR(256) NOT NULL, rel VARCHAR(128) NOT NULL, target VARCHAR(256) NOT NULL, attrs TEXT, \
             valid_from DATETIME NOT NULL, valid_to DATETIME)",
            "CREATE INDEX ix_graph_edges_source ON graph_edges (graph, owner_id, source)",
            "CREATE INDEX ix_graph_edges_target ON graph_edges (graph, owner_id, target)",
            "CREATE UNIQUE INDEX ux_graph_edges_active ON graph_edges (graph, owner_id, source, rel, target) \
             WHERE valid_to IS NULL",
            "INSERT INTO graph_edges VALUES ('memory', 'me', 'person:alex', 'prefers', 'tech:vue', \
             '{\"since\": 2020}', '2025-01-31 09:30:00.123456', NULL)",
        ] {
            sqlx::query(sqlx::AssertSqlSafe(statement)).execute(&pool).await.unwrap();
        }
        pool.close().await;

        let store = GraphStore::new(&path);
        let linked = store.link(SCOPE, "Person:Alex", "prefers", "tech:Vue", None).await.unwrap();
        assert!(!linked.created, "the old row is the live edge");
        let around = store.neighbors(SCOPE, &query("person:alex")).await.unwrap();
        assert_eq!(around.edges.len(), 1);
        assert_eq!(around.edges[0].valid_from.as_deref(), Some("2025-01-31T09:30:00.123456+00:00"));
        store.close().await;
    }

    #[tokio::test]
    async fn merge_rewrites_live_edges_drops_duplicates_and_rekeys_history() {
        let dir = tempfile::tempdir().unwrap();
        let store = GraphStore::new(dir.path().join("g.db"));
        store.link(SCOPE, "person:alex", "uses", "tech:vue", None).await.unwrap();
        store.link(SCOPE, "person:alexander", "uses", "tech:vue", None).await.unwrap();
        store.link(SCOPE, "person:alexander", "works_on", "project:site", None).await.unwrap();
        store.link(SCOPE, "person:alexander", "knew", "person:bo", None).await.unwrap();
        store.unlink(SCOPE, "person:alexander", "knew", "person:bo").await.unwrap();
        let merged = store.merge(SCOPE, "person:alexander", "person:alex").await.unwrap();
        assert_eq!(
            (merged.edges_rewritten, merged.active_duplicates_discarded, merged.history_edges_rekeyed),
            (2, 1, 1)
        );
        let mut around = query("person:alex");
        around.history = true;
        let around = store.neighbors(SCOPE, &around).await.unwrap();
        assert_eq!(around.nodes, ["person:alex", "project:site", "tech:vue"]);
        assert_eq!(around.history[0].target, "person:bo");
        assert!(store.merge(SCOPE, "person:alex", "Person:ALEX").await.is_err());
        store.close().await;
    }

    #[tokio::test]
    async fn owners_and_namespaces_do_not_see_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let store = GraphStore::new(dir.path().join("g.db"));
        store.link(SCOPE, "person:alex", "uses", "tech:vue", None).await.unwrap();
        let other = Scope { graph: "memory", owner_id: "someone" };
        assert!(store.search(other, "alex", 25, true).await.unwrap().edges.is_empty());
        let work = Scope { graph: "work", owner_id: "me" };
        assert!(!store.neighbors(work, &query("person:alex")).await.unwrap().found);
        // A `_` in the query is literal: `person_alex` is not `person:alex`.
        assert!(store.search(SCOPE, "person%alex", 25, false).await.unwrap().edges.is_empty());
        assert_eq!(store.search(SCOPE, "Person:Alex", 25, false).await.unwrap().edges.len(), 1);
        store.close().await;
    }

    #[test]
    fn times_read_back_as_iso_utc() {
        assert_eq!(iso("2025-01-31 09:30:00"), "2025-01-31T09:30:00.000000+00:00");
        assert_eq!(iso("2025-01-31T09:30:00.5+02:00"), "2025-01-31T07:30:00.500000+00:00");
        assert_eq!(iso("garbage"), "garbage");
    }
}
