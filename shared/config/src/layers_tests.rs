#![allow(clippy::expect_used, clippy::unwrap_used)]

use super::*;
use crate::vars::Vars;

fn table(text: &str) -> toml::Table {
    toml::from_str(text).expect("test TOML parses")
}

fn overrides(pairs: &[(&str, &str)]) -> Vec<Override> {
    crate::overrides::collect(&pairs.iter().copied().collect::<Vars>()).expect("valid overrides")
}

/// The crate itself, without our file source: what it does to names and keys decides how the file is handed
/// over (see the module comment).
#[test]
fn the_crate_lowercases_variable_names_and_splits_top_level_keys_but_not_nested_ones() {
    let vars: config::Map<String, String> =
        [("MINIBOT__LLM__EXTRA_HEADERS__X_Title".to_string(), "y".to_string())].into_iter().collect();
    let nested =
        Value::new(None, ValueKind::Table([("API_KEY.v2".to_string(), Value::from("x"))].into_iter().collect()));
    let built = config::Config::builder()
        .set_default("Top.Dotted", "t")
        .unwrap()
        .set_default("env", nested)
        .unwrap()
        .add_source(
            config::Environment::with_prefix("MINIBOT").prefix_separator("__").separator("__").source(Some(vars)),
        )
        .build()
        .unwrap();
    let merged = to_toml(built.cache).unwrap();
    let expected = table(
        "llm = { extra_headers = { x_title = \"y\" } }\nTop = { Dotted = \"t\" }\nenv = { \"API_KEY.v2\" = \"x\" }\n",
    );
    assert_eq!(merged, toml::Value::Table(expected));
}

#[test]
fn a_file_without_overrides_comes_back_exactly() {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/minibot-0.36-config.example.toml");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/config.example.toml");
    let written = "[tools.mcp]\n[[tools.mcp.servers]]\nname = \"a\"\nenv = { API_KEY = \"x\", \"a.b\" = 1 }\n\
                   headers = { \"X-Title\" = \"y\" }\n[[tools.mcp.servers]]\nname = \"b\"\n\
                   [extensions.config]\nWhen = 1979-05-27T07:32:00Z\nday = 1979-05-27\nempty = {}\nnone = []\n\
                   floats = [1.5, -0.0, inf]\n[providers.\"My.Proxy\"]\nCase = true\n";
    for text in [std::fs::read_to_string(fixture).unwrap(), std::fs::read_to_string(example).unwrap(), written.into()] {
        let file = table(&text);
        assert_eq!(merge(file.clone(), "config.toml", &[]).unwrap(), file);
    }
}

#[test]
fn overrides_win_and_leave_the_rest_of_the_file_alone() {
    let file = table(
        "[channels.telegram]\nbot_token = \"from-file\"\nmode = \"long_polling\"\n\
         [llm]\nextra_headers = { \"X-Title\" = \"t\" }\n",
    );
    let merged = merge(
        file,
        "config.toml",
        &overrides(&[
            ("MINIBOT__CHANNELS__TELEGRAM__BOT_TOKEN", "123:abc"),
            ("MINIBOT__WORKER__LABELS", "[\"gpu\", \"browser\"]"),
            ("MINIBOT__TASKS__LOCAL_WORKERS", "3"),
        ]),
    )
    .unwrap();
    let expected = table(
        "[channels.telegram]\nbot_token = \"123:abc\"\nmode = \"long_polling\"\n\
         [llm]\nextra_headers = { \"X-Title\" = \"t\" }\n[worker]\nlabels = [\"gpu\", \"browser\"]\n\
         [tasks]\nlocal_workers = \"3\"\n",
    );
    assert_eq!(merged, expected, "text stays text until the typed read");
}

#[test]
fn an_inline_table_replaces_the_files_table() {
    let file = table("[llm]\nextra_headers = { \"X-Title\" = \"t\", \"X-Other\" = \"o\" }\n");
    let merged =
        merge(file, "config.toml", &overrides(&[("MINIBOT__LLM__EXTRA_HEADERS", "{ \"X-Team\" = \"ops\" }")])).unwrap();
    assert_eq!(merged, table("[llm]\nextra_headers = { \"X-Team\" = \"ops\" }\n"));
}

#[test]
fn a_value_that_is_not_toml_names_the_variable() {
    let err = merge(toml::Table::new(), "config.toml", &overrides(&[("MINIBOT__WORKER__LABELS", "[gpu, browser]")]))
        .expect_err("bare words are not TOML")
        .to_string();
    assert!(
        err.starts_with("environment variable MINIBOT__WORKER__LABELS (`worker.labels`): starts with `[`"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
