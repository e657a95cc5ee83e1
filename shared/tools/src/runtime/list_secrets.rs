//! `list_secrets`: the names of the vault's secrets, so the model can say which credentials the owner has set
//! up. Never a value: secrets reach the places that use them through `${secret:NAME}` in the config or MCP
//! `auth_secret`, not through the model. Offered to the main agent only when the vault is on (and so unlocked
//! at start-up), as in MiniBot; workers do not get it.

use minibot_agent::{Tool, ToolContext, ToolResult};
use minibot_config::Config;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

tool_struct!(ListSecrets { config: Arc<Config> });

/// No arguments; like MiniBot's schema it does not forbid extra ones, so they are ignored.
#[derive(Deserialize)]
pub struct Args {}

impl Tool for ListSecrets {
    type Args = Args;

    fn name(&self) -> &str {
        "list_secrets"
    }

    fn description(&self) -> String {
        "List the names of the secrets stored in the vault (never their values). The owner binds them in the \
         configuration as ${secret:NAME}."
            .into()
    }

    fn parameters(&self) -> Value {
        json!({ "type": "object", "properties": {} })
    }

    async fn call(&self, _args: Args, _ctx: &ToolContext) -> ToolResult {
        Ok(json!({ "names": self.config.secrets.names() }))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use minibot_config::Unlock;

    #[tokio::test]
    async fn lists_names_and_never_values() {
        let secrets = secrets_of(&[("OPENAI_KEY", "sk-secret-value"), ("gh.token", "ghp-secret")]);
        let config =
            Config::from_toml_with("[vault]\nenabled = true\n", "t.toml", "/tmp", &|_| None, Unlock::Given(secrets))
                .expect("config");
        let tool = ListSecrets::new(Arc::new(config));
        let out =
            tool.call(serde_json::from_value(json!({ "ignored": 1 })).unwrap(), &ToolContext::default()).await.unwrap();
        assert_eq!(out, json!({ "names": ["OPENAI_KEY", "gh.token"] }));
        assert!(!out.to_string().contains("secret-value") && !out.to_string().contains("ghp-"));
    }

    fn secrets_of(pairs: &[(&str, &str)]) -> minibot_config::Secrets {
        minibot_config::Secrets::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }
}
