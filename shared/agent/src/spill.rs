//! Generic output spill (`[tools.tool_output_spill]`): a [`DynTool`] wrapper that swaps a result too long for
//! the context for a preview plus a managed-file pointer, which the agent reads back with `code_read`, `grep`,
//! `read_file` or `bash`.
//!
//! Spill only makes sense when a read-back tool is in the same set, so [`wrap_with_spill`] leaves the registry
//! untouched otherwise. Length is measured on the JSON text the model would receive, with non-ASCII counted as
//! its `\uXXXX` escape, as MiniBot did. Results that carry a `directive` (`send_file`, `self_insert_artifact`)
//! keep it, so spilling never loses the side effect.

use crate::registry::ToolRegistry;
use crate::tool::{DynTool, ToolContext, ToolResult};
use futures_util::future::BoxFuture;
use minibot_config::ToolOutputSpillSection;
use minibot_llm::ToolSpec;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Tools that can read a spilled file back.
pub const READBACK_TOOLS: &[&str] = &["code_read", "grep", "read_file", "bash"];
/// `activate_skill` instructions are meant to be read whole; they spill only past this.
const SKILL_FLOOR_CHARS: usize = 64_000;
/// Scalar fields longer than this are not copied into the spilled result.
const SHORT_FIELD_CHARS: usize = 200;

/// Where spilled files go and how big a result may be.
#[derive(Debug, Clone)]
pub struct SpillSettings {
    /// The managed-file root; `output_file_path` is shown relative to it.
    pub root: PathBuf,
    /// Folder under the root for spilled files.
    pub subdir: String,
    pub spill_after_chars: usize,
    pub preview_chars: usize,
}

/// A tool whose long results are spilled.
pub struct SpillTool {
    inner: Arc<dyn DynTool>,
    settings: Arc<SpillSettings>,
    threshold: usize,
    readback: Arc<str>,
}

impl SpillTool {
    pub fn new(inner: Arc<dyn DynTool>, settings: Arc<SpillSettings>, readback: &[String]) -> Self {
        let threshold = if inner.name() == "activate_skill" {
            settings.spill_after_chars.max(SKILL_FLOOR_CHARS)
        } else {
            settings.spill_after_chars
        };
        Self { inner, settings, threshold, readback: readback.join(", ").into() }
    }
}

/// Wraps every tool of `registry` not in `exclude_tools`, when spill is on, a managed root exists and the set
/// has a read-back tool. Otherwise returns the registry as it is.
pub fn wrap_with_spill(registry: &ToolRegistry, config: &ToolOutputSpillSection, root: Option<&Path>) -> ToolRegistry {
    let Some(root) = root.filter(|_| config.enabled) else {
        return registry.clone();
    };
    let readback: Vec<String> =
        READBACK_TOOLS.iter().filter(|t| registry.get(t).is_some()).map(|t| t.to_string()).collect();
    if readback.is_empty() {
        return registry.clone();
    }
    let settings = Arc::new(SpillSettings {
        root: root.to_path_buf(),
        subdir: config.subdir.clone(),
        spill_after_chars: config.spill_after_chars as usize,
        preview_chars: config.preview_chars as usize,
    });
    let mut out = ToolRegistry::new();
    for name in registry.names() {
        let Some(tool) = registry.get(&name) else {
            continue;
        };
        if config.exclude_tools.iter().any(|excluded| excluded == &name) {
            out.register(Arc::clone(tool));
        } else {
            out.register(Arc::new(SpillTool::new(Arc::clone(tool), Arc::clone(&settings), &readback)));
        }
    }
    out
}

impl DynTool for SpillTool {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn call_json<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolResult> {
        Box::pin(async move {
            let value = self.inner.call_json(args, ctx).await?;
            let text = match &value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            if escaped_len(&text) <= self.threshold {
                return Ok(value);
            }
            Ok(self.spill(value).await)
        })
    }
}

impl SpillTool {
    async fn spill(&self, value: Value) -> Value {
        // Saved pretty-printed: one field per line lets code_read and grep page through it, where a single
        // compact line would come back as one oversized match.
        let text = match &value {
            Value::String(text) => text.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
        };
        let name = self.inner.name().to_string();
        let mut out = short_fields(&value);
        let ok = value.get("ok") != Some(&Value::Bool(false));
        out.insert("ok".into(), json!(ok));
        out.insert("tool".into(), json!(name));
        if let Some(directive) = value.get("directive") {
            out.insert("directive".into(), directive.clone());
        }
        let preview: String = text.chars().take(self.settings.preview_chars).collect();
        let suffix = if value.is_string() { ".txt" } else { ".json" };
        let settings = Arc::clone(&self.settings);
        let prefix = format!("tool-{}-", safe_name(&name));
        let bytes = text.into_bytes();
        let size = bytes.len();
        let written =
            tokio::task::spawn_blocking(move || write_file(&settings.root, &settings.subdir, &prefix, suffix, &bytes))
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|r| r);
        match written {
            Ok(path) => {
                let relative = path.strip_prefix(&self.settings.root).map(|p| p.display().to_string()).ok();
                out.insert("output_storage".into(), json!("managed_file"));
                out.insert("output_file_path".into(), json!(relative.unwrap_or_else(|| path.display().to_string())));
                out.insert("output_file_absolute_path".into(), json!(path.display().to_string()));
                out.insert("output_bytes_written".into(), json!(size));
                out.insert("output_preview".into(), json!(preview));
                out.insert(
                    "output_notice".into(),
                    json!(format!(
                        "Output exceeded {} chars and was saved to a managed file. Use {} on output_file_path to \
                         read the parts you need instead of calling the tool again.",
                        self.threshold, self.readback
                    )),
                );
            }
            Err(err) => {
                tracing::warn!(tool = %name, error = %err, "tool output spill failed; cutting the result instead");
                out.insert("output_truncated".into(), json!(true));
                out.insert("output_preview".into(), json!(preview));
                out.insert(
                    "output_notice".into(),
                    json!(format!(
                        "Output exceeded {} chars and could not be saved ({err}); only the start is shown.",
                        self.threshold
                    )),
                );
            }
        }
        Value::Object(out)
    }
}

/// Length of `text` once JSON-escaped with ASCII only: what the model is charged for.
fn escaped_len(text: &str) -> usize {
    text.chars().map(|c| if c.is_ascii() { 1 } else { 6 * c.len_utf16() }).sum()
}

/// The short scalar fields of an error result (`error_code`, `error`, …), so a failure stays readable.
fn short_fields(value: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(object) = value.as_object() else {
        return out;
    };
    if object.get("ok") != Some(&Value::Bool(false)) {
        return out;
    }
    for (key, field) in object {
        let keep = match field {
            Value::Null | Value::Bool(_) | Value::Number(_) => true,
            Value::String(s) => s.chars().count() <= SHORT_FIELD_CHARS,
            Value::Array(_) | Value::Object(_) => false,
        };
        if keep {
            out.insert(key.clone(), field.clone());
        }
    }
    out
}

fn safe_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).take(60).collect()
}

fn write_file(root: &Path, subdir: &str, prefix: &str, suffix: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    // The subdir comes from config; refuse one that climbs out of the root rather than trust it.
    if Path::new(subdir).is_absolute() || subdir.split('/').any(|p| p == "..") {
        return Err(std::io::Error::other("spill subdir must be a relative path inside the managed root"));
    }
    let folder = root.join(subdir);
    std::fs::create_dir_all(&folder)?;
    let file = tempfile::Builder::new().prefix(prefix).suffix(suffix).rand_bytes(6).tempfile_in(&folder)?;
    std::fs::write(file.path(), bytes)?;
    let (_, path) = file.keep().map_err(|e| e.error)?;
    Ok(path)
}
