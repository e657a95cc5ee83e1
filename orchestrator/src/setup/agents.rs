//! The bundled specialists (`agents/` of the source tree, built into the program), written next to a new config
//! so that an installed `minibot` run from any folder has them, as a run from the source folder does.

use super::document::write_private;
use std::path::Path;

const BUNDLED: [(&str, &str); 2] = [
    ("researcher.md", include_str!("../../../agents/researcher.md")),
    ("coder.md", include_str!("../../../agents/coder.md")),
];

/// Writes the bundled specialists into `folder` when it does not exist yet; a folder the user has (even an empty
/// one, which means "no specialists") is left alone. Returns the names written.
pub fn install_bundled(folder: &Path) -> anyhow::Result<Vec<&'static str>> {
    if folder.exists() {
        return Ok(Vec::new());
    }
    // Private like the config: a specialist's prompt and tool lists are the user's to change, nobody else's.
    let mut written = Vec::new();
    for (name, text) in BUNDLED {
        write_private(&folder.join(name), text)?;
        written.push(name.trim_end_matches(".md"));
    }
    Ok(written)
}
