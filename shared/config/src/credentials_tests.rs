#![allow(clippy::unwrap_used)]

use super::*;
use std::collections::BTreeMap;

fn load(toml: &str, vars: &[(&str, &str)]) -> Config {
    let vars: BTreeMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Config::from_toml(toml, "t.toml", std::env::temp_dir(), &|name| vars.get(name).cloned()).unwrap()
}

/// The redactor with a process environment of `env` only.
fn redactor(config: &Config, env: &[(&str, &str)]) -> Redactor {
    let env: BTreeMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    config.redactor_with(&|name| env.get(name).cloned())
}

#[test]
fn every_configured_credential_is_masked_whatever_its_source() {
    let toml = r#"
[llm]
api_key = "${LLM_KEY}"
extra_headers = { "X-Team" = "team-name-not-a-secret" }

[providers.gw]
api_format = "openai"
api_key = "sk-gw-written-literally-02"
base_url = "https://gw.example.org/v1"
headers = { "Authorization" = "Bearer gw-header-token-03" }

[channels.telegram]
enabled = false
bot_token = "123456:telegram-bot-token-05"
webhook_secret_token = "${HOOK_SECRET}"

[rabbitmq]
broker_url = "amqp://bot:rabbit-password-06@broker.example.org:5672/%2f"

[http]
auth_token = "web-auth-token-value-07"

[tools.mcp]
enabled = false

[[tools.mcp.servers]]
name = "gh"
command = "gh-mcp"
env = { GITHUB_TOKEN = "ghp-mcp-env-token-08", LOG_FORMAT = "json-with-colours" }

[[tools.mcp.servers]]
name = "remote"
transport = "http"
url = "https://mcp.example.org/mcp"
headers = { "Authorization" = "Bearer mcp-header-token-09" }
"#;
    let config = load(toml, &[("LLM_KEY", "sk-llm-from-a-variable-01"), ("HOOK_SECRET", "webhook-secret-value-10")]);
    // The key a provider without one falls back on, from the process environment.
    let redactor = redactor(&config, &[("OPENROUTER_API_KEY", "sk-or-env-fallback-04"), ("HOME", "/home/someone")]);
    let secrets = [
        "sk-llm-from-a-variable-01",
        "sk-gw-written-literally-02",
        "gw-header-token-03",
        "sk-or-env-fallback-04",
        "123456:telegram-bot-token-05",
        "rabbit-password-06",
        "web-auth-token-value-07",
        "ghp-mcp-env-token-08",
        "mcp-header-token-09",
        "webhook-secret-value-10",
    ];
    for secret in secrets {
        assert_eq!(redactor.redact(&format!("<{secret}>")), "<***>", "{secret}");
    }
    assert_eq!(redactor.redact("Bearer gw-header-token-03"), "***", "the whole header value goes too");
    // Values of keys that hold no credential stay, and so do other variables of the environment.
    for plain in ["team-name-not-a-secret", "json-with-colours", "/home/someone", "broker.example.org"] {
        assert_eq!(redactor.redact(plain), plain);
    }
}

#[test]
fn the_vault_and_its_password_are_masked_from_four_characters_other_values_from_twelve() {
    let mut config =
        load("[llm]\napi_key = \"ollama\"\n[rabbitmq]\nbroker_url = \"amqp://guest:guest@localhost:5672/\"\n", &[]);
    config.secrets = minibot_vault::Secrets::new(BTreeMap::from([("PIN".to_string(), "4321".to_string())]));
    config.vault_password = Some(minibot_vault::Password::new("vault pw".to_string().into()));
    let redactor = redactor(&config, &[("OPENAI_API_KEY", "EMPTY")]);
    assert_eq!(redactor.redact("pin 4321, password vault pw"), "pin ***, password ***");
    // Placeholders are words: the chat may well say them.
    assert_eq!(redactor.redact("pull ollama as guest, EMPTY"), "pull ollama as guest, EMPTY");
}

#[test]
fn url_passwords_are_masked_as_written_and_decoded() {
    let config = load("[rabbitmq]\nbroker_url = \"amqps://bot:p%40ss-word-with-at@broker:5671/\"\n", &[]);
    let redactor = redactor(&config, &[]);
    assert_eq!(redactor.redact("p%40ss-word-with-at"), "***");
    assert_eq!(redactor.redact("p@ss-word-with-at"), "***");
    assert_eq!(percent_decode("100%"), Some("100%".into()), "a lone % stays");
    assert_eq!(percent_decode("plain"), None);
}

/// Red-team report (#22, F6): a key in a base_url's query, and the Basic header a `user:password@` URL sends,
/// were shown in doctor's output and the log.
#[test]
fn query_keys_and_the_basic_header_of_a_url_are_masked() {
    let config =
        load("[llm]\nbase_url = \"http://u:SECRETPASSWORD12345@gw.example/v1?key=SECRETQUERYKEY12345&v=2\"\n", &[]);
    let redactor = redactor(&config, &[]);
    let echoed = "got key SECRETQUERYKEY12345 and Basic dTpTRUNSRVRQQVNTV09SRDEyMzQ1 for v=2";
    assert_eq!(redactor.redact(echoed), "got key *** and Basic *** for v=2");
}

#[test]
fn secret_names() {
    for name in ["Authorization", "X-Api-Key", "GITHUB_TOKEN", "DB_PASSWORD", "client_secret", "Cookie"] {
        assert!(is_secret_name(name), "{name}");
    }
    for name in ["X-Team", "LOG_LEVEL", "HTTP-Referer", "PATH"] {
        assert!(!is_secret_name(name), "{name}");
    }
}

/// Red-team report (#22, F6c): a type error quoted the expanded secret (`invalid type: string "sk-…"`).
#[test]
fn a_type_error_quotes_the_reference_not_the_secret() {
    let lookup = |name: &str| (name == "LLM_KEY").then(|| "sk-live-abcdef0123456789".to_string());
    let error = Config::from_toml("[llm]\ntemperature = \"${LLM_KEY}x\"\n", "c.toml", "/tmp", &lookup).unwrap_err();
    let text = error.to_string();
    assert!(!text.contains("sk-live"), "{text}");
    assert!(text.contains("\"${LLM_KEY}x\" (as written)"), "{text}");
}

/// Red-team report (#22, B6): a message that quotes a value (an unknown provider) printed the key a
/// `${…}` reference stood for.
#[test]
fn an_error_that_quotes_a_value_does_not_print_the_key_it_came_from() {
    let lookup = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-LEAKME1234567".to_string());
    let error = Config::from_toml("[llm]\nprovider = \"${OPENAI_API_KEY}\"\n", "c.toml", "/tmp", &lookup).unwrap_err();
    let text = error.to_string();
    assert!(!text.contains("LEAKME"), "{text}");
    assert!(text.contains("***"), "{text}");
}

/// Red-team report (#22, third pass): credentials with names or values the first filter missed.
#[test]
fn credentials_are_known_by_name_or_by_value() {
    for (name, value) in [
        ("GITHUB_PAT", "x"),
        ("DB_PWD", "x"),
        ("SENTRY_DSN", "https://k@o.ingest/1"),
        ("SLACK_WEBHOOK_URL", "https://hooks/x"),
        ("CI_JOB_JWT", "x"),
        ("DATABASE_URL", "postgres://u:p4ss@db/app"),
        ("CONN_STR", "Server=x;Pwd=secret"),
    ] {
        assert!(is_secret_variable(name, value), "{name}");
    }
    for (name, value) in
        [("PATH", "/usr/bin"), ("PWD", "/home/me"), ("LANG", "C.UTF-8"), ("DB_URL", "postgres://db/app")]
    {
        assert!(!is_secret_variable(name, value), "{name}");
    }
}
