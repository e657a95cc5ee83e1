use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use serde::Deserialize;
use serde_json::{Value, json};

/// Declares how the final answer is rendered. The agent loop reads the last call's result.
pub struct PreResponse;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    kind: String,
    #[serde(default)]
    meta: Option<Meta>,
    #[serde(default)]
    attachments: Option<Vec<Attachment>>,
}

#[derive(Deserialize, serde::Serialize, Default)]
#[serde(deny_unknown_fields)]
struct Meta {
    #[serde(default)]
    disable_link_preview: Option<bool>,
}

#[derive(Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct Attachment {
    path: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    caption: Option<String>,
}

impl Tool for PreResponse {
    type Args = Args;

    fn name(&self) -> &str {
        "pre_response"
    }

    fn description(&self) -> String {
        "Declare how your final answer should be rendered before you write it: `kind` is text, html or \
         markdown (the default); `meta.disable_link_preview` turns link previews off."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "kind": { "type": "string", "enum": ["text", "html", "markdown"] },
                "meta": {
                    "type": ["object", "null"],
                    "properties": { "disable_link_preview": { "type": ["boolean", "null"] } },
                    "additionalProperties": false
                },
                "attachments": {
                    "type": ["array", "null"],
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": { "type": "string" },
                            "type": { "type": "string" },
                            "caption": { "type": ["string", "null"] }
                        },
                        "required": ["path", "type"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["kind"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        if !matches!(args.kind.as_str(), "text" | "html" | "markdown") {
            return Err(ToolError::invalid_arguments(format!(
                "kind must be text, html or markdown, not `{}`",
                args.kind
            )));
        }
        Ok(json!({
            "kind": args.kind,
            "meta": args.meta.unwrap_or_default(),
            "attachments": args.attachments.unwrap_or_default(),
        }))
    }
}
