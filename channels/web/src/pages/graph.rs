//! /graph: the owner's relation graph (the `[extensions]` graph module): its live nodes (`?node_offset=`) and
//! every edge, live ones first and unlinked ones after as history (`?offset=`).

use super::browse::{self, BadParam, count, pager, when};
use super::layout::page;
use crate::readers::{EdgeRow, NodeRow, ReadError, Readers, Rows};
use crate::state::WebState;
use actix_web::{HttpResponse, http::StatusCode, web};
use maud::{Markup, html};
use serde::Deserialize;

const TITLE: &str = "Graph";
const PATH: &str = "/graph";
const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 200;

#[derive(Debug, Default, Deserialize)]
pub struct GraphQuery {
    pub offset: Option<String>,
    pub node_offset: Option<String>,
    pub limit: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Params {
    pub offset: u64,
    pub node_offset: u64,
    pub limit: u32,
}

pub fn parse(query: &GraphQuery) -> Result<Params, BadParam> {
    Ok(Params {
        offset: browse::offset(query.offset.as_deref(), "offset")?,
        node_offset: browse::offset(query.node_offset.as_deref(), "node_offset")?,
        limit: browse::limit(query.limit.as_deref(), DEFAULT_LIMIT, MAX_LIMIT)?,
    })
}

pub async fn handler(state: web::Data<WebState>, query: web::Query<GraphQuery>) -> HttpResponse {
    respond(&state.readers, !state.credentials.is_open(), &query).await
}

pub async fn respond(readers: &Readers, signed_in: bool, query: &GraphQuery) -> HttpResponse {
    let params = match parse(query) {
        Ok(params) => params,
        Err(bad) => return browse::bad_request(TITLE, PATH, signed_in, &bad),
    };
    let read = async {
        let nodes = readers.graph_nodes(params.limit, params.node_offset).await?;
        let edges = readers.graph_edges(params.limit, params.offset).await?;
        Ok::<_, ReadError>((nodes, edges))
    };
    match read.await {
        Ok((nodes, edges)) => {
            browse::html_response(StatusCode::OK, page(TITLE, PATH, signed_in, render(&params, &nodes, &edges)))
        }
        Err(error) => browse::read_failed(TITLE, PATH, signed_in, &error),
    }
}

pub fn render(params: &Params, nodes: &Rows<NodeRow>, edges: &Rows<EdgeRow>) -> Markup {
    // Each table's pager keeps the other table where it is.
    let limit = if params.limit == DEFAULT_LIMIT { String::new() } else { params.limit.to_string() };
    let keep_edges = [("limit", limit.clone()), ("offset", nonzero(params.offset))];
    let keep_nodes = [("limit", limit), ("node_offset", nonzero(params.node_offset))];
    html! {
        h1 { (TITLE) }
        h2 { "Nodes (" (count(nodes.total, "live node", "live nodes")) ")" }
        @if !nodes.rows.is_empty() {
            table #nodes {
                thead { tr { th { "Namespace" } th { "Node" } th { "Live edges" } } }
                tbody { @for node in &nodes.rows { tr { td { (node.graph) } td { code { (node.node) } } td { (node.edges) } } } }
            }
        }
        (pager(PATH, &keep_edges, "node_offset", params.node_offset, params.limit, nodes.rows.len(), Some(nodes.total)))
        h2 { "Edges (" (count(edges.total, "edge", "edges")) ")" }
        @if !edges.rows.is_empty() {
            table #edges {
                thead { tr { th { "Namespace" } th { "Source" } th { "Relation" } th { "Target" } th { "Attributes" } th { "Since" } th { "Until" } } }
                tbody {
                    @for edge in &edges.rows {
                        tr.closed[edge.valid_to.is_some()] {
                            td { (edge.graph) }
                            td { code { (edge.source) } }
                            td { (edge.rel) }
                            td { code { (edge.target) } }
                            td.text { (edge.attrs.as_deref().unwrap_or("")) }
                            td { (when(&edge.valid_from)) }
                            td { @match &edge.valid_to { Some(to) => (when(to)), None => "live" } }
                        }
                    }
                }
            }
        }
        (pager(PATH, &keep_nodes, "offset", params.offset, params.limit, edges.rows.len(), Some(edges.total)))
    }
}

fn nonzero(offset: u64) -> String {
    if offset == 0 { String::new() } else { offset.to_string() }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use minibot_graph::{GraphStore, Scope};
    use std::sync::Arc;

    use super::browse::status_and_text as text;

    fn query(offset: Option<&str>, node_offset: Option<&str>, limit: Option<&str>) -> GraphQuery {
        GraphQuery {
            offset: offset.map(Into::into),
            node_offset: node_offset.map(Into::into),
            limit: limit.map(Into::into),
        }
    }

    #[tokio::test]
    async fn nodes_and_edges_are_listed_and_paged() {
        let dir = tempfile::tempdir().unwrap();
        let config = "[extensions]\nmodules = [\"minibot.extensions.tools.graph\"]\n";
        let config = minibot_config::Config::from_toml(config, "t.toml", dir.path(), &|_| None).unwrap();
        let url = config.extensions.graph_sqlite_url().unwrap();
        let store = GraphStore::new(config.resolve_path(&minibot_config::sqlite_path_from_url(&url).unwrap()));
        let scope = Scope { graph: "memory", owner_id: &config.runtime.owner_id };
        let attrs = serde_json::json!({ "note": "<script>x</script>" }).as_object().cloned();
        store.link(scope, "person:Ana", "knows", "person:Bo", attrs).await.unwrap();
        store.link(scope, "person:Bo", "works_at", "org:Acme", None).await.unwrap();
        store.link(scope, "person:Ana", "likes", "food:Tea", None).await.unwrap();
        store.unlink(scope, "person:Ana", "likes", "food:Tea").await.unwrap();
        store.close().await;
        let readers = Readers::new(Arc::new(config), None);

        let (status, page) = text(respond(&readers, false, &query(None, None, None)).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            page.contains("3 live nodes") && page.contains("3 edges"),
            "the unlinked edge's nodes are not live: {page}"
        );
        assert!(page.contains("person:ana") && page.contains("org:acme") && page.contains("works_at"), "{page}");
        assert!(page.contains("&lt;script&gt;") && !page.contains("<script>"), "{page}");
        assert!(page.contains(r#"class="closed""#), "an unlinked edge is marked: {page}");

        let (_, page) = text(respond(&readers, false, &query(None, Some("1"), Some("1"))).await).await;
        assert!(page.contains(r#"href="/graph?limit=1&amp;node_offset=2""#), "next nodes, edges kept: {page}");
        let (status, page) = text(respond(&readers, false, &query(None, Some("1.5"), None)).await).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(page.contains("node_offset must be a whole number, not `1.5`"), "{page}");
        readers.close().await;
    }

    #[tokio::test]
    async fn the_graph_off_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let config = minibot_config::Config::from_toml("", "t.toml", dir.path(), &|_| None).unwrap();
        let readers = Readers::new(Arc::new(config), None);
        let (status, page) = text(respond(&readers, false, &query(None, None, None)).await).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("The relation graph is off"), "{page}");
    }
}
