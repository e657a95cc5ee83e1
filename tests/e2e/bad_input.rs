use minibot_e2e::{Home, run, stderr};

async fn fails_with(config_text: &str, expected: &[&str]) {
    let home = Home::new("http://127.0.0.1:9/v1", "");
    std::fs::write(home.config(), config_text).unwrap();
    let output = run(home.minibot(&["console", "--once", "hi"])).await;
    assert_eq!(output.status.code(), Some(2), "stderr: {}", stderr(&output));
    let err = stderr(&output);
    for part in expected {
        assert!(err.contains(part), "expected {part:?} in: {err}");
    }
    assert_eq!(err.trim().lines().count(), 1, "one clear line: {err}");
}

#[tokio::test]
async fn unknown_key_is_named() {
    fails_with("[llm]\napi_key = \"k\"\nmodle = \"gpt-4o\"\n", &["modle", "llm"]).await;
}

#[tokio::test]
async fn unknown_section_is_named() {
    fails_with("[telegram]\nbot_token = \"x\"\n", &["unknown section [telegram]"]).await;
}

#[tokio::test]
async fn unset_variable_names_variable_and_key() {
    fails_with("[llm]\napi_key = \"${MINIBOT_E2E_UNSET_VARIABLE}\"\n", &["MINIBOT_E2E_UNSET_VARIABLE", "llm.api_key"])
        .await;
}

#[tokio::test]
async fn malformed_toml_names_the_line() {
    let home = Home::new("http://127.0.0.1:9/v1", "");
    std::fs::write(home.config(), "[llm]\nmodel = \"gpt\napi_key = \"k\"\n").unwrap();
    let output = run(home.minibot(&["console", "--once", "hi"])).await;
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("config.toml") && err.contains("line 2"), "{err}");
}

#[tokio::test]
async fn missing_api_key_says_what_to_set() {
    fails_with("[llm]\nmodel = \"gpt-4o-mini\"\n", &["llm.api_key", "OPENAI_API_KEY"]).await;
}

#[tokio::test]
async fn explicit_missing_config_file_is_an_error() {
    let home = Home::new("http://127.0.0.1:9/v1", "");
    std::fs::remove_file(home.config()).unwrap();
    let output = run(home.minibot(&["console", "--once", "hi"])).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("config.toml"), "{}", stderr(&output));
}
