use chrono::format::{Item, StrftimeItems};
use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_config::TimeSection;
use serde::Deserialize;
use serde_json::{Value, json};

const MAX_FORMAT_CHARS: usize = 200;

pub struct CurrentDatetime {
    default_format: String,
}

impl CurrentDatetime {
    pub fn new(config: &TimeSection) -> Self {
        Self { default_format: config.default_format.clone() }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    #[serde(default)]
    format: Option<String>,
}

impl Tool for CurrentDatetime {
    type Args = Args;

    fn name(&self) -> &str {
        "current_datetime"
    }

    fn description(&self) -> String {
        "Return the current date and time in UTC. `format` is an optional strftime pattern such as \
         \"%Y-%m-%d %H:%M\"; the default is ISO 8601."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "format": { "type": ["string", "null"], "description": "strftime pattern" } },
            "required": [],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let format = args.format.filter(|f| !f.trim().is_empty()).unwrap_or_else(|| self.default_format.clone());
        if format.chars().count() > MAX_FORMAT_CHARS {
            return Err(ToolError::invalid_arguments(format!("format is longer than {MAX_FORMAT_CHARS} characters")));
        }
        // chrono panics when it formats an invalid pattern, so the pattern is checked first.
        let items: Vec<Item<'_>> = StrftimeItems::new(&format).collect();
        if items.iter().any(|item| matches!(item, Item::Error)) {
            return Err(ToolError::invalid_arguments(format!("`{format}` is not a valid strftime format")));
        }
        let timestamp = chrono::Utc::now().format_with_items(items.into_iter()).to_string();
        Ok(json!({ "timestamp": timestamp }))
    }
}
