//! The relation graph (MiniBot's `minibot.extensions.tools.graph`): typed edges `source -rel-> target` between
//! `type:id` nodes, scoped to one owner and one namespace, stored in SQLite (`graph_edges`, the same table and
//! indexes MiniBot's SQLAlchemy store makes, so its graph.db opens unchanged). An edge is live until unlinked;
//! unlinking sets `valid_to` and keeps the row as history. This crate owns the ids' normalisation ([`ids`]),
//! the table and its six operations ([`GraphStore`]); the walks run in memory over one namespace's live edges
//! ([`traverse`]). The `graph_*` tools in `minibot-tools` are thin wrappers over it.

pub mod ids;
mod store;
pub mod traverse;

pub use store::GraphStore;

use serde::Serialize;
use serde_json::Value;

/// The namespace a call without `graph` uses.
pub const DEFAULT_NAMESPACE: &str = "memory";
/// MiniBot's default database URL for the extension.
pub const DEFAULT_SQLITE_URL: &str = "sqlite+aiosqlite:///./data/graph.db";

#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// Arguments no edge can be made of (an id with no letter or digit, merging a node into itself); the
    /// caller should say so to whoever sent them.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Open(#[from] minibot_sqlite::Error),
    #[error("cannot migrate the graph database {path}: {source}")]
    Migrate { path: std::path::PathBuf, source: sqlx::migrate::MigrateError },
    #[error("graph database error: {0}")]
    Query(#[from] sqlx::Error),
}

impl GraphError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }
}

pub type Result<T> = std::result::Result<T, GraphError>;

/// Whose graph a call reads or writes: a namespace and an owner.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub graph: &'a str,
    pub owner_id: &'a str,
}

/// Which way `graph_neighbors` follows edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From source to target.
    Out,
    /// Backwards: what points at the node.
    In,
    Both,
}

impl Direction {
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "out" => Some(Self::Out),
            "in" => Some(Self::In),
            "both" => Some(Self::Both),
            _ => None,
        }
    }
}

/// One edge as the tools report it. `attrs` only when it has fields; times as ISO 8601 UTC.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Edge {
    pub source: String,
    pub rel: String,
    pub target: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attrs: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_to: Option<String>,
}

/// `graph_link`'s answer: `created` is false when the live triple already existed (its attrs were replaced).
#[derive(Debug, Serialize)]
pub struct Linked {
    pub created: bool,
    pub edge: Edge,
}

/// `graph_unlink`'s answer: whether a live edge was closed.
#[derive(Debug, Serialize)]
pub struct Unlinked {
    pub closed: bool,
}

/// `graph_merge`'s answer, with MiniBot's counts: `edges_rewritten` counts live and closed edges re-keyed.
#[derive(Debug, Serialize)]
pub struct Merged {
    pub merged: String,
    pub into: String,
    pub edges_rewritten: u64,
    pub active_duplicates_discarded: u64,
    pub history_edges_rekeyed: u64,
}

/// What `graph_neighbors` asks for.
#[derive(Debug, Clone)]
pub struct NeighborQuery {
    pub node: String,
    pub direction: Direction,
    pub depth: usize,
    pub rel: Option<String>,
    pub history: bool,
    pub limit: usize,
    pub max_nodes: usize,
}

/// `graph_neighbors`' answer: the nodes reached (nearest first), the live edges among them, the closed edges
/// touching them when asked, and whether `max_nodes` cut the node list.
#[derive(Debug, Serialize)]
pub struct Neighborhood {
    pub node: String,
    pub found: bool,
    pub nodes: Vec<String>,
    pub edges: Vec<Edge>,
    pub history: Vec<Edge>,
    pub truncated: bool,
}

/// `graph_path`'s answer; `reason` says why nothing was found.
#[derive(Debug, Serialize)]
pub struct PathFound {
    pub found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub nodes: Vec<String>,
    pub hops: Vec<Hop>,
}

/// One step of a path: the edge as stored, and whether the path walks it `forward` or `backward`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hop {
    pub source: String,
    pub rel: String,
    pub target: String,
    pub direction: &'static str,
}

/// `graph_search`'s answer: the query as given and the matching edges, newest first.
#[derive(Debug, Serialize)]
pub struct Found {
    pub query: String,
    pub edges: Vec<Edge>,
}
