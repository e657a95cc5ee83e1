//! Every ```toml block of the manual loads as a config file, the way the program loads one (`Config::from_toml`),
//! unless it is listed below with the reason it is only a part of one.

use super::manual::{Block, blocks};
use minibot_config::{Config, Secrets, Unlock};
use std::collections::BTreeMap;

/// (file, first line of the block, why it does not load on its own).
const FRAGMENTS: &[(&str, &str, &str)] = &[];

/// `${secret:NAME}` names in `text`.
fn secret_names(text: &str) -> BTreeMap<String, String> {
    text.split("${secret:")
        .skip(1)
        .filter_map(|rest| rest.split_once('}'))
        .map(|(name, _)| (name.to_string(), "0123456789abcdef".repeat(4)))
        .collect()
}

fn loads(block: &Block) -> Result<Config, String> {
    let text = block.text();
    let dir = tempfile::tempdir().unwrap();
    // Any environment variable a block names is set; its value only has to be a string.
    let lookup = |_: &str| Some("placeholder".to_string());
    let secrets = Secrets::new(secret_names(&text));
    Config::from_toml_with(&text, &block.place(), dir.path(), &lookup, Unlock::Given(secrets))
        .map_err(|e| e.to_string())
}

#[test]
fn every_toml_block_of_the_manual_loads() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for block in blocks().iter().filter(|b| b.lang == "toml") {
        let first = block.lines.iter().find(|l| !l.trim().is_empty()).cloned().unwrap_or_default();
        let fragment = FRAGMENTS.iter().find(|(file, line, _)| *file == block.file && *line == first);
        match (loads(block), fragment) {
            (Ok(_), None) => checked += 1,
            (Err(e), None) => failures.push(format!("{}: {e}", block.place())),
            (Ok(_), Some(_)) => failures.push(format!("{}: loads now; drop it from FRAGMENTS", block.place())),
            (Err(_), Some(_)) => {}
        }
    }
    assert!(failures.is_empty(), "toml blocks of the manual that do not load:\n{}", failures.join("\n"));
    assert!(checked > 20, "only {checked} toml blocks were found");
}
