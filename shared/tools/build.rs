//! Compiles the user manual (`docs/*.md` at the workspace root) into the binary for `read_docs`: writes
//! `$OUT_DIR/docs_pages.rs`, a table of `(page, text)` in name order, each text an `include_str!` of its file.
//! A build without the folder gets an empty table, and `read_docs` answers `docs_unavailable`.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let docs = manifest.join("../../docs");
    // A directory here makes cargo rerun when any file under it changes, appears or goes.
    println!("cargo:rerun-if-changed={}", docs.display());
    let mut pages: Vec<(String, PathBuf)> = std::fs::read_dir(&docs)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "md"))
                .filter_map(|path| Some((path.file_stem()?.to_str()?.to_string(), path.canonicalize().ok()?)))
                .collect()
        })
        .unwrap_or_default();
    pages.sort();
    let mut table = String::from("pub(crate) static PAGES: &[(&str, &str)] = &[\n");
    for (name, path) in &pages {
        table.push_str(&format!("    ({name:?}, include_str!({:?})),\n", path_text(path)));
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("docs_pages.rs");
    if let Err(error) = std::fs::write(&out, table) {
        println!("cargo:warning=cannot write {}: {error}", out.display());
        std::process::exit(1);
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
