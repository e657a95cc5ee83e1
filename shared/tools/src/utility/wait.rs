use minibot_agent::{Tool, ToolContext, ToolError, ToolResult};
use minibot_config::WaitSection;
use serde::Deserialize;
use serde_json::{Value, json};
use std::time::Duration;

pub struct Wait {
    max_milliseconds: u64,
}

impl Wait {
    pub fn new(config: &WaitSection) -> Self {
        Self { max_milliseconds: config.max_milliseconds }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    milliseconds: i64,
}

impl Tool for Wait {
    type Args = Args;

    fn name(&self) -> &str {
        "wait"
    }

    fn description(&self) -> String {
        format!("Pause for a number of milliseconds (at most {}).", self.max_milliseconds)
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": { "milliseconds": { "type": "integer", "minimum": 1 } },
            "required": ["milliseconds"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        let requested = u64::try_from(args.milliseconds)
            .ok()
            .filter(|ms| *ms >= 1)
            .ok_or_else(|| ToolError::invalid_arguments("milliseconds must be at least 1"))?;
        let slept = requested.min(self.max_milliseconds);
        tokio::time::sleep(Duration::from_millis(slept)).await;
        Ok(json!({ "ok": true, "slept_ms": slept, "requested_ms": requested }))
    }
}
