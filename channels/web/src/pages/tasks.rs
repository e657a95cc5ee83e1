//! Background tasks: the running ones (or all with `?status=all`), with their progress and a Cancel button.
//! The page's script reloads the table every two seconds (`?fragment=1` gives the table alone), so progress
//! moves without a reload.

use super::layout::page;
use maud::{Markup, html};
use serde_json::Value;

/// Tasks shown at most.
pub const LIMIT: u32 = 200;

pub fn render(tasks: &Result<Value, String>, all: bool, signed_in: bool, notice: Option<&str>) -> Markup {
    page(
        "Tasks",
        "/tasks",
        signed_in,
        html! {
            h1 { "Background tasks" }
            p.switch {
                @if all { a href="/tasks" { "Running only" } " · All" } @else { "Running · " a href="/tasks?status=all" { "All" } }
            }
            @if let Some(notice) = notice { p.notice role="status" { (notice) } }
            div #tasks-live data-status=(if all { "all" } else { "running" }) { (table(tasks, all)) }
        },
    )
}

/// The table alone, for the page's refresh.
pub fn table(tasks: &Result<Value, String>, all: bool) -> Markup {
    let rows: Vec<&Value> = match tasks {
        Ok(value) => value["tasks"]
            .as_array()
            .map(|tasks| tasks.iter().filter(|t| all || is_active(t)).collect())
            .unwrap_or_default(),
        Err(error) => return html! { p.error { (error) } },
    };
    html! {
        @if rows.is_empty() {
            p #no-tasks { @if all { "No tasks yet." } @else { "No task is running." } }
        } @else {
            table #tasks {
                thead { tr { th { "Task" } th { "Agent" } th { "Status" } th { "Progress" } th { "Worker" } th { "Created" } th {} } }
                tbody {
                    @for task in rows {
                        @let id = task["task_id"].as_str().unwrap_or_default();
                        tr data-task=(id) data-status=(text(&task["status"])) {
                            td { code { (short(id)) } }
                            td { (task["agent_name"].as_str().unwrap_or("general")) }
                            td.status { (text(&task["status"])) }
                            td.progress { (progress(&task["progress"])) }
                            td { (task["worker"]["host"].as_str().or(task["worker"]["worker_id"].as_str()).unwrap_or("")) }
                            td { (when(&task["created_at"])) }
                            td {
                                @if is_active(task) {
                                    form method="post" action="/tasks/cancel" {
                                        input type="hidden" name="task_id" value=(id);
                                        button type="submit" { "Cancel" }
                                    }
                                } @else if let Some(preview) = task["result_preview"].as_str() {
                                    span.preview { (preview) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn is_active(task: &Value) -> bool {
    matches!(task["status"].as_str(), Some("pending" | "running"))
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// A worker's progress as a line: `step 3 · read_file, grep · 1,234 tokens` (and the attempt after the first);
/// a `message`/`percent` note as it is; anything else as its JSON.
fn progress(value: &Value) -> String {
    if let Some(step) = value["step"].as_u64() {
        let mut parts = vec![format!("step {step}")];
        let tools: Vec<&str> =
            value["tool_names"].as_array().map(|t| t.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        if !tools.is_empty() {
            parts.push(tools.join(", "));
        }
        if let Some(tokens) = value["total_tokens"].as_u64().filter(|t| *t > 0) {
            parts.push(format!("{tokens} tokens"));
        }
        if let Some(attempt) = value["attempt"].as_u64().filter(|a| *a > 1) {
            parts.push(format!("attempt {attempt}"));
        }
        return parts.join(" · ");
    }
    let message = value["message"].as_str().or(value["text"].as_str());
    let percent = value["percent"].as_f64();
    match (message, percent) {
        (Some(m), Some(p)) => format!("{p:.0} % {m}"),
        (Some(m), None) => m.to_string(),
        (None, Some(p)) => format!("{p:.0} %"),
        (None, None) if value.is_null() || value.as_object().is_some_and(|o| o.is_empty()) => String::new(),
        (None, None) => value.to_string(),
    }
}

/// `2026-12-04 21:19:05` from a stored RFC 3339 time; other text as it is.
fn when(value: &Value) -> String {
    let text = text(value);
    match (text.get(..10), text.get(11..19)) {
        (Some(day), Some(time)) if text.as_bytes().get(10) == Some(&b'T') => format!("{day} {time}"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn progress_reads_as_a_line() {
        let running = json!({ "phase": "running", "step": 3, "tool_names": ["read_file", "grep"], "total_tokens": 1234, "attempt": 2 });
        assert_eq!(progress(&running), "step 3 · read_file, grep · 1234 tokens · attempt 2");
        assert_eq!(progress(&json!({ "step": 1, "tool_names": [], "attempt": 1 })), "step 1");
        assert_eq!(when(&json!("2026-12-04T21:19:05.123456Z")), "2026-12-04 21:19:05");
    }

    #[test]
    fn running_view_hides_finished_tasks_and_escapes_text() {
        let tasks = Ok(json!({ "tasks": [
            { "task_id": "aaaaaaaaaaaaaaaa", "status": "running", "progress": { "message": "<b>step 2</b>" } },
            { "task_id": "bbbbbbbbbbbbbbbb", "status": "done", "result_preview": "ok" },
        ]}));
        let running = table(&tasks, false).into_string();
        assert!(running.contains("aaaaaaaaaaaa") && !running.contains("bbbbbbbbbbbb"));
        assert!(running.contains("&lt;b&gt;step 2&lt;/b&gt;") && running.contains("Cancel"));
        let all = table(&tasks, true).into_string();
        assert!(all.contains("bbbbbbbbbbbb"));
    }
}
