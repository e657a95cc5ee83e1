//! Walks over the live edges of one namespace, loaded whole (as MiniBot does): breadth-first distances for
//! `graph_neighbors`, the undirected shortest path and its hops for `graph_path`. Neighbours are visited in the
//! order their edges were written, so equal-length answers come out the same every time.

use crate::{Direction, Edge, Hop};
use std::collections::{HashMap, HashSet, VecDeque};

/// Adjacency lists keyed by node, in edge order.
struct Adjacency<'e> {
    next: HashMap<&'e str, Vec<&'e str>>,
}

impl<'e> Adjacency<'e> {
    fn new(edges: &'e [Edge], direction: Direction) -> Self {
        let mut next: HashMap<&str, Vec<&str>> = HashMap::new();
        for edge in edges {
            let (s, t) = (edge.source.as_str(), edge.target.as_str());
            if matches!(direction, Direction::Out | Direction::Both) {
                next.entry(s).or_default().push(t);
            }
            if matches!(direction, Direction::In | Direction::Both) {
                next.entry(t).or_default().push(s);
            }
        }
        Self { next }
    }

    fn of(&self, node: &str) -> &[&'e str] {
        self.next.get(node).map_or(&[], Vec::as_slice)
    }
}

/// Whether `node` is an end of any edge.
pub fn contains(edges: &[Edge], node: &str) -> bool {
    edges.iter().any(|e| e.source == node || e.target == node)
}

/// Every node within `depth` hops of `start` (itself at 0) following `direction`, with its distance.
pub fn distances(edges: &[Edge], start: &str, direction: Direction, depth: usize) -> Vec<(String, usize)> {
    let adjacency = Adjacency::new(edges, direction);
    let mut seen: HashSet<&str> = HashSet::from([start]);
    let mut out = vec![(start.to_string(), 0)];
    let mut queue = VecDeque::from([(start, 0usize)]);
    while let Some((node, distance)) = queue.pop_front() {
        if distance == depth {
            continue;
        }
        for &next in adjacency.of(node) {
            if seen.insert(next) {
                out.push((next.to_string(), distance + 1));
                queue.push_back((next, distance + 1));
            }
        }
    }
    out
}

/// The shortest chain of nodes from `source` to `target`, edges read in either direction; `None` when they are
/// not connected.
pub fn shortest_path(edges: &[Edge], source: &str, target: &str) -> Option<Vec<String>> {
    let adjacency = Adjacency::new(edges, Direction::Both);
    let mut parent: HashMap<&str, &str> = HashMap::new();
    let mut seen: HashSet<&str> = HashSet::from([source]);
    let mut queue = VecDeque::from([source]);
    while let Some(node) = queue.pop_front() {
        if node == target {
            let mut path = vec![node.to_string()];
            let mut at = node;
            while let Some(&previous) = parent.get(at) {
                path.push(previous.to_string());
                at = previous;
            }
            path.reverse();
            return Some(path);
        }
        for &next in adjacency.of(node) {
            if seen.insert(next) {
                parent.insert(next, node);
                queue.push_back(next);
            }
        }
    }
    None
}

/// The edges between consecutive nodes of a path: those pointing along it `forward`, then those pointing back.
pub fn hops(edges: &[Edge], nodes: &[String]) -> Vec<Hop> {
    let mut out = Vec::new();
    for pair in nodes.windows(2) {
        let (left, right) = (&pair[0], &pair[1]);
        for (from, to, direction) in [(left, right, "forward"), (right, left, "backward")] {
            out.extend(edges.iter().filter(|e| &e.source == from && &e.target == to).map(|e| Hop {
                source: e.source.clone(),
                rel: e.rel.clone(),
                target: e.target.clone(),
                direction,
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(source: &str, rel: &str, target: &str) -> Edge {
        Edge {
            source: source.into(),
            rel: rel.into(),
            target: target.into(),
            attrs: None,
            valid_from: None,
            valid_to: None,
        }
    }

    fn graph() -> Vec<Edge> {
        vec![
            edge("person:alex", "prefers", "tech:vue"),
            edge("project:site", "migration_target", "tech:vue"),
            edge("project:site", "uses", "tech:python"),
            edge("person:bo", "works_on", "project:site"),
        ]
    }

    #[test]
    fn distances_follow_the_direction_asked() {
        let edges = graph();
        let out = distances(&edges, "person:alex", Direction::Out, 5);
        assert_eq!(out, [("person:alex".to_string(), 0), ("tech:vue".to_string(), 1)]);
        let inward = distances(&edges, "tech:vue", Direction::In, 1);
        assert_eq!(inward.len(), 3);
        let both = distances(&edges, "person:alex", Direction::Both, 2);
        assert!(both.contains(&("project:site".to_string(), 2)));
        assert!(!both.iter().any(|(n, _)| n == "tech:python"), "three hops away");
    }

    #[test]
    fn paths_cross_edges_backwards_and_say_so() {
        let edges = graph();
        let path = shortest_path(&edges, "person:alex", "tech:python").unwrap();
        assert_eq!(path, ["person:alex", "tech:vue", "project:site", "tech:python"]);
        let hops = hops(&edges, &path);
        let directions: Vec<_> = hops.iter().map(|h| (h.rel.as_str(), h.direction)).collect();
        assert_eq!(directions, [("prefers", "forward"), ("migration_target", "backward"), ("uses", "forward")]);
        assert_eq!(shortest_path(&edges, "tech:vue", "tech:vue").unwrap(), ["tech:vue"]);
        let mut split = edges.clone();
        split.push(edge("x:a", "r", "x:b"));
        assert!(shortest_path(&split, "x:a", "tech:vue").is_none());
    }
}
