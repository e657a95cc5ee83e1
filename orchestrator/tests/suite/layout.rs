//! The orchestrator's modules depend on each other one way. This reads `crate::` and `super::` paths in every
//! file under `orchestrator/src` (and `pub use child::…` re-exports of parent modules) and fails on a cycle,
//! naming it, so a ring like router → runtime → router cannot come back unnoticed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `a/b.rs` → `a::b`, `a/mod.rs` → `a`, `lib.rs` → the crate root (empty).
fn module_of(src: &Path, file: &Path) -> Module {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Module = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn without_comments(text: &str) -> String {
    text.lines().map(|line| line.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths that follow each `marker` (`crate::`, `super::`), as segments; a `{a, b::c}` group gives one path
/// per item.
fn paths_after(text: &str, marker: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for (at, _) in text.match_indices(marker) {
        if at > 0 && text[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &text[at + marker.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            for item in inner.split(',') {
                paths.push(segments(item.trim()));
            }
        } else {
            paths.push(segments(rest));
        }
    }
    paths
}

fn segments(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    loop {
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        out.push(rest[..end].to_string());
        match rest[end..].strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    out
}

/// The longest prefix of `path` that names a module.
fn resolve(path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|prefix| modules.contains(prefix))
}

fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    // `main.rs` is the binary: it reaches the library by its crate name, never `crate::`.
    files.retain(|f| f.file_name().is_some_and(|n| n != "main.rs"));
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(&src, f)).collect();
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for file in &files {
        let from = module_of(&src, file);
        if from.is_empty() {
            continue; // the crate root declares every module
        }
        let text = without_comments(&std::fs::read_to_string(file).unwrap());
        let parent: Module = from[..from.len() - 1].to_vec();
        let is_folder_module = file.file_name().is_some_and(|n| n == "mod.rs");
        let mut targets: Vec<Vec<String>> = paths_after(&text, "crate::");
        for path in paths_after(&text, "super::") {
            // `super` of `a/b.rs` is `a`; of `a/mod.rs` it is the crate root.
            let base = if is_folder_module { from[..from.len() - 1].to_vec() } else { parent.clone() };
            targets.push(base.into_iter().chain(path).collect());
        }
        if is_folder_module {
            for line in text.lines().map(str::trim).filter(|l| l.starts_with("pub use ")) {
                let path = segments(line.trim_start_matches("pub use ").trim_start_matches("self::"));
                targets.push(from.iter().cloned().chain(path).collect());
            }
        }
        let set = edges.entry(from.clone()).or_default();
        for target in targets {
            if let Some(to) = resolve(&target, &modules).filter(|to| *to != from && !to.is_empty()) {
                set.insert(to);
            }
        }
    }
    edges
}

fn find_cycle(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        node: &Module,
        edges: &BTreeMap<Module, BTreeSet<Module>>,
        done: &mut BTreeSet<Module>,
        stack: &mut Vec<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.clone());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|node| visit(node, edges, &mut done, &mut Vec::new()))
}

fn name(module: &Module) -> String {
    module.join("::")
}

#[test]
fn orchestrator_modules_have_no_dependency_cycle() {
    let edges = graph();
    // The parser must see the graph at all, or the test would pass on nothing.
    let of = |m: &str| edges.get(&m.split("::").map(String::from).collect::<Module>()).cloned().unwrap_or_default();
    assert!(of("router").contains(&vec!["conversation".to_string()]), "router → conversation is read: {edges:?}");
    assert!(of("boot").contains(&vec!["runtime".to_string()]), "boot → runtime is read");
    if let Some(cycle) = find_cycle(&edges) {
        panic!("module cycle: {}", cycle.iter().map(name).collect::<Vec<_>>().join(" → "));
    }
}

#[test]
fn messages_depend_on_no_actor() {
    for (from, to) in graph() {
        if from.first().is_some_and(|m| m == "messages") {
            let outside: Vec<String> = to.iter().filter(|t| t[0] != "messages").map(name).collect();
            assert!(outside.is_empty(), "{} uses {outside:?}", name(&from));
        }
    }
}

#[test]
fn a_ring_is_reported() {
    let module = |m: &str| vec![m.to_string()];
    let mut edges = BTreeMap::new();
    edges.insert(module("a"), BTreeSet::from([module("b")]));
    edges.insert(module("b"), BTreeSet::from([module("c")]));
    edges.insert(module("c"), BTreeSet::from([module("a")]));
    let cycle = find_cycle(&edges).expect("a cycle");
    assert_eq!(cycle.len(), 4, "{cycle:?}");
    assert_eq!(paths_after("use crate::{a::B, c};", "crate::"), vec![segments("a::B"), segments("c")]);
}
