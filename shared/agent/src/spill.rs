//! Generic output spill (`[tools.tool_output_spill]`): a [`DynTool`] wrapper that swaps a result too long for
//! the context for a preview plus a managed-file pointer, which the agent reads back with `code_read`, `grep`,
//! `read_file` or `bash`.
//!
//! A pointer is only useful to an agent that can follow it, so the read-back tools named are those of the
//! calling agent ([`ToolContext::agent_tools`], set by the agent loop; the tools of the wrapped registry for a
//! call outside a run). With none of them, or with spill off, a long result is cut instead: a preview and a
//! notice that says so. Tools that declare their own limit ([`DynTool::spill_after_chars`], MCP bindings) are
//! spilled past `max(spill_after_chars, their limit)` and, when spill is off or they are excluded, cut at their
//! limit. Length is measured on the JSON text the model would receive, with non-ASCII counted as its
//! `\uXXXX` escape, as MiniBot did. Results that carry a `directive` (`send_file`, `self_insert_artifact`)
//! keep it, so neither spilling nor cutting loses the side effect.
//!
//! The files are written through a [`SpillStore`], never by joining a path: the managed root is a folder the
//! model's own commands can write (a contained `bash` runs there), so a folder on the way may have been swapped
//! for a link to anywhere by the time the spill writes. The file tools' `ManagedRoot` is the store in the
//! assistant; it does every operation through its directory handle, which refuses to leave the root.

use crate::registry::ToolRegistry;
use crate::tool::{DynTool, ToolContext, ToolResult};
use futures_util::future::BoxFuture;
use minibot_config::ToolOutputSpillSection;
use minibot_llm::ToolSpec;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// Tools that can read a spilled file back.
pub const READBACK_TOOLS: &[&str] = &["code_read", "grep", "read_file", "bash"];
/// `activate_skill` instructions are meant to be read whole; they spill only past this.
const SKILL_FLOOR_CHARS: usize = 64_000;
/// Scalar fields longer than this are not copied into the spilled result.
const SHORT_FIELD_CHARS: usize = 200;

/// The managed root as the spill (and the safety check that reads spilled results back) uses it. Every
/// operation must stay inside the root even when a folder on the way is, or becomes, a link: an implementation
/// resolves from a handle on the root, not from a path string.
pub trait SpillStore: Send + Sync {
    /// Writes `bytes` to a new file `<subdir>/<prefix>XXXXXX<suffix>` below the root (never over an existing
    /// one) and says where it went. A `subdir` that leads outside the root is an error.
    fn create_spill(&self, subdir: &str, prefix: &str, suffix: &str, bytes: &[u8]) -> std::io::Result<SpilledFile>;
    /// Opens a regular file below the root, by its path relative to the root, for reading.
    fn open_spilled(&self, relative: &str) -> std::io::Result<std::fs::File>;
    /// Deletes a file below the root, by its path relative to the root; a link at that name is removed, not
    /// followed.
    fn remove_spilled(&self, relative: &str) -> std::io::Result<()>;
}

/// Where a spilled result was saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpilledFile {
    /// Relative to the managed root, with `/` separators: what the model is shown and reads back.
    pub relative: String,
    pub absolute: PathBuf,
}

/// Where spilled files go and how big a result may be.
#[derive(Clone)]
pub struct SpillSettings {
    /// The managed-file root, which writes the files.
    pub store: Arc<dyn SpillStore>,
    /// Folder under the root for spilled files.
    pub subdir: String,
    pub spill_after_chars: usize,
    pub preview_chars: usize,
}

/// A tool whose long results are spilled, or cut where they cannot be.
pub struct SpillTool {
    inner: Arc<dyn DynTool>,
    /// `None`: spill is off for this tool; a result past `threshold` is cut.
    settings: Option<Arc<SpillSettings>>,
    threshold: usize,
    /// The read-back tools of the registry it was wrapped in, for calls made outside an agent run.
    readback: Vec<String>,
}

impl SpillTool {
    /// Wraps `inner`. With `settings` its results spill past the global limit (or the tool's own, if higher);
    /// without, they are cut at the tool's own limit (and pass whole when it declares none).
    pub fn new(inner: Arc<dyn DynTool>, settings: Option<Arc<SpillSettings>>, readback: &[String]) -> Self {
        let own = inner.spill_after_chars();
        let threshold = match &settings {
            Some(settings) if inner.name() == "activate_skill" => {
                settings.spill_after_chars.max(SKILL_FLOOR_CHARS).max(own.unwrap_or(0))
            }
            Some(settings) => settings.spill_after_chars.max(own.unwrap_or(0)),
            None => own.unwrap_or(usize::MAX),
        };
        Self { inner, settings, threshold, readback: readback.to_vec() }
    }

    /// The read-back tools the calling agent has, in [`READBACK_TOOLS`] order.
    fn readback_for(&self, ctx: &ToolContext) -> Vec<String> {
        match &ctx.agent_tools {
            Some(tools) => READBACK_TOOLS
                .iter()
                .filter(|name| tools.iter().any(|tool| tool == *name))
                .map(|name| name.to_string())
                .collect(),
            None => self.readback.clone(),
        }
    }
}

/// Wraps every tool of `registry` for spill when spill is on and a managed root exists, except the
/// `exclude_tools`; a tool that declares its own limit is wrapped either way, to be cut there when it does not
/// spill. Tools with neither are returned as they are.
pub fn wrap_with_spill(
    registry: &ToolRegistry,
    config: &ToolOutputSpillSection,
    root: Option<&Arc<dyn SpillStore>>,
) -> ToolRegistry {
    let settings = root.filter(|_| config.enabled).map(|store| {
        Arc::new(SpillSettings {
            store: Arc::clone(store),
            subdir: config.subdir.clone(),
            spill_after_chars: usize::try_from(config.spill_after_chars).unwrap_or(usize::MAX),
            preview_chars: usize::try_from(config.preview_chars).unwrap_or(usize::MAX),
        })
    });
    let readback: Vec<String> =
        READBACK_TOOLS.iter().filter(|t| registry.get(t).is_some()).map(|t| t.to_string()).collect();
    let mut out = ToolRegistry::new();
    for name in registry.names() {
        let Some(tool) = registry.get(&name) else {
            continue;
        };
        let excluded = config.exclude_tools.iter().any(|excluded| excluded == &name);
        let settings = settings.as_ref().filter(|_| !excluded);
        if settings.is_none() && tool.spill_after_chars().is_none() {
            out.register(Arc::clone(tool));
        } else {
            out.register(Arc::new(SpillTool::new(Arc::clone(tool), settings.cloned(), &readback)));
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
            // Errors pass through: they are capped where they become the tool message (`error_result`).
            let value = self.inner.call_json(args, ctx).await?;
            // A script's call: the result goes to the script, which filters it; its own output limits protect
            // the context (reference 3.17).
            if ctx.parent_call_id.is_some() {
                return Ok(value);
            }
            let text = match &value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            if escaped_len(&text) <= self.threshold {
                return Ok(value);
            }
            let Some(settings) = &self.settings else {
                let notice = format!(
                    "Output exceeded {} chars and was cut; output_preview holds its start. Ask for a narrower \
                     result (a smaller range, a filter) if you need more.",
                    self.threshold
                );
                return Ok(self.cut(value, notice));
            };
            let readback = self.readback_for(ctx);
            if readback.is_empty() {
                let notice = format!(
                    "Output exceeded {} chars and was cut; output_preview holds its start. It was not saved to a \
                     file because you have no tool to read one back. Ask for a narrower result if you need more.",
                    self.threshold
                );
                return Ok(self.cut(value, notice));
            }
            Ok(self.spill(value, settings, &readback.join(", ")).await)
        })
    }
}

impl SpillTool {
    async fn spill(&self, value: Value, settings: &Arc<SpillSettings>, readback: &str) -> Value {
        // Saved pretty-printed: one field per line lets code_read and grep page through it, where a single
        // compact line would come back as one oversized match.
        let text = match &value {
            Value::String(text) => text.clone(),
            other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
        };
        let name = self.inner.name().to_string();
        let mut out = self.envelope(&value);
        let preview: String = text.chars().take(settings.preview_chars).collect();
        let suffix = if value.is_string() { ".txt" } else { ".json" };
        let target = Arc::clone(settings);
        let prefix = format!("tool-{}-", safe_name(&name));
        let bytes = text.into_bytes();
        let size = bytes.len();
        let written =
            tokio::task::spawn_blocking(move || target.store.create_spill(&target.subdir, &prefix, suffix, &bytes))
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))
                .and_then(|r| r);
        match written {
            Ok(file) => {
                out.insert("output_storage".into(), json!("managed_file"));
                out.insert("output_file_path".into(), json!(file.relative));
                out.insert("output_file_absolute_path".into(), json!(file.absolute.display().to_string()));
                out.insert("output_bytes_written".into(), json!(size));
                out.insert("output_preview".into(), json!(preview));
                out.insert(
                    "output_notice".into(),
                    json!(format!(
                        "Output exceeded {} chars and was saved to a managed file. Use {readback} on \
                         output_file_path to read the parts you need instead of calling the tool again.",
                        self.threshold
                    )),
                );
                Value::Object(out)
            }
            Err(err) => {
                tracing::warn!(tool = %name, error = %err, "tool output spill failed; cutting the result instead");
                let notice = format!(
                    "Output exceeded {} chars and could not be saved ({err}); output_preview holds its start.",
                    self.threshold
                );
                self.cut(value, notice)
            }
        }
    }

    /// The result cut to its first `threshold` characters (as the model counts them), with `notice`.
    fn cut(&self, value: Value, notice: String) -> Value {
        let mut out = self.envelope(&value);
        let mut budget = self.threshold;
        let preview: String = main_text(&value)
            .chars()
            .take_while(|c| {
                let cost = if c.is_ascii() { 1 } else { 6 * c.len_utf16() };
                let fits = cost <= budget;
                budget = budget.saturating_sub(cost);
                fits
            })
            .collect();
        out.insert("output_truncated".into(), json!(true));
        out.insert("output_preview".into(), json!(preview));
        out.insert("output_notice".into(), json!(notice));
        Value::Object(out)
    }

    /// What a spilled or cut result keeps of the original: the short fields of an error, `ok`, the tool's
    /// name, and the directive.
    fn envelope(&self, value: &Value) -> Map<String, Value> {
        let mut out = short_fields(value);
        out.insert("ok".into(), json!(value.get("ok") != Some(&Value::Bool(false))));
        out.insert("tool".into(), json!(self.inner.name()));
        if let Some(directive) = value.get("directive") {
            out.insert("directive".into(), directive.clone());
        }
        out
    }
}

/// The text a cut preview shows: a string result itself; the one long text field of an object (an MCP
/// `result`, a file's `content`), so the preview is readable text rather than escaped JSON; else the JSON.
fn main_text(value: &Value) -> String {
    if let Value::String(text) = value {
        return text.clone();
    }
    if let Some(object) = value.as_object() {
        let nested = object.values().any(|v| v.is_array() || v.is_object());
        let mut long = object.values().filter_map(Value::as_str).filter(|s| s.chars().count() > SHORT_FIELD_CHARS);
        if let (false, Some(text), None) = (nested, long.next(), long.next()) {
            return text.to_string();
        }
    }
    value.to_string()
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
