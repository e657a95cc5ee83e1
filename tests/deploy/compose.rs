//! docker-compose.yml read the way `docker compose` reads it (anchors and `<<` merge keys applied), into the parts
//! the checks need. Every short and long syntax the Compose specification allows for these keys is accepted.

use serde_yaml_ng::Value;
use std::collections::BTreeMap;

#[derive(Debug)]
pub struct Compose {
    pub services: BTreeMap<String, Service>,
    /// Top-level `volumes:` (named volumes).
    pub volumes: Vec<String>,
    /// Top-level `secrets:` with a `file:`, by name.
    pub secret_files: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
pub struct Service {
    pub image: Option<String>,
    /// `build:` context and Dockerfile, relative to the compose file's folder.
    pub build: Option<(String, String)>,
    pub entrypoint: Option<Vec<String>>,
    pub command: Option<Vec<String>>,
    /// `environment:` as written (values may hold `${VAR}` interpolation).
    pub environment: Vec<(String, String)>,
    pub env_files: Vec<String>,
    pub volumes: Vec<Mount>,
    pub secrets: Vec<String>,
    pub has_ports: bool,
    pub container_name: Option<String>,
    pub hostname: Option<String>,
    pub healthcheck_test: Option<Vec<String>>,
    /// `depends_on` service → condition (`service_started` when none is given).
    pub depends_on: BTreeMap<String, String>,
    /// `security_opt` as written (`seccomp=…`, `apparmor=…`, `systempaths=…`).
    pub security_opt: Vec<String>,
    pub privileged: bool,
    pub cap_add: Vec<String>,
}

#[derive(Debug)]
pub struct Mount {
    /// A named volume or a host path (`./…`, `/…`).
    pub source: String,
    pub target: String,
}

impl Mount {
    pub fn is_bind(&self) -> bool {
        self.source.starts_with('.') || self.source.starts_with('/') || self.source.starts_with('~')
    }
}

impl Compose {
    pub fn parse(text: &str) -> Self {
        let mut root: Value = serde_yaml_ng::from_str(text).expect("docker-compose.yml is YAML");
        root.apply_merge().expect("merge keys apply");
        let services = root
            .get("services")
            .and_then(Value::as_mapping)
            .expect("a services: mapping")
            .iter()
            .map(|(name, service)| (text_of(name), Service::read(service)))
            .collect();
        let volumes = keys(root.get("volumes"));
        let secret_files = root
            .get("secrets")
            .and_then(Value::as_mapping)
            .map(|m| m.iter().filter_map(|(k, v)| Some((text_of(k), text_of(v.get("file")?)))).collect())
            .unwrap_or_default();
        Self { services, volumes, secret_files }
    }
}

impl Service {
    fn read(value: &Value) -> Self {
        let build = value.get("build").map(|build| match build {
            Value::String(context) => (context.clone(), "Dockerfile".to_string()),
            other => (
                other.get("context").map(text_of).unwrap_or_else(|| ".".into()),
                other.get("dockerfile").map(text_of).unwrap_or_else(|| "Dockerfile".into()),
            ),
        });
        let environment = match value.get("environment") {
            Some(Value::Mapping(map)) => {
                map.iter().map(|(k, v)| (text_of(k), if v.is_null() { String::new() } else { text_of(v) })).collect()
            }
            Some(Value::Sequence(list)) => list
                .iter()
                .map(|item| {
                    let item = text_of(item);
                    let (k, v) = item.split_once('=').unwrap_or((&item, ""));
                    (k.to_string(), v.to_string())
                })
                .collect(),
            _ => vec![],
        };
        let env_files = match value.get("env_file") {
            Some(Value::String(path)) => vec![path.clone()],
            Some(Value::Sequence(list)) => {
                list.iter().map(|item| item.get("path").map(text_of).unwrap_or_else(|| text_of(item))).collect()
            }
            _ => vec![],
        };
        let volumes = sequence(value.get("volumes"))
            .iter()
            .map(|item| match item {
                Value::String(short) => {
                    let mut parts = short.splitn(3, ':');
                    let first = parts.next().unwrap_or_default().to_string();
                    match parts.next() {
                        Some(target) => Mount { source: first, target: target.to_string() },
                        None => Mount { source: String::new(), target: first },
                    }
                }
                long => Mount {
                    source: long.get("source").map(text_of).unwrap_or_default(),
                    target: long.get("target").map(text_of).unwrap_or_default(),
                },
            })
            .collect();
        let secrets = sequence(value.get("secrets"))
            .iter()
            .map(|item| item.get("source").map(text_of).unwrap_or_else(|| text_of(item)))
            .collect();
        let depends_on = match value.get("depends_on") {
            Some(Value::Sequence(list)) => list.iter().map(|s| (text_of(s), "service_started".into())).collect(),
            Some(Value::Mapping(map)) => map
                .iter()
                .map(|(k, v)| (text_of(k), v.get("condition").map(text_of).unwrap_or_else(|| "service_started".into())))
                .collect(),
            _ => BTreeMap::new(),
        };
        Self {
            image: value.get("image").map(text_of),
            build,
            entrypoint: value.get("entrypoint").map(words),
            command: value.get("command").map(words),
            environment,
            env_files,
            volumes,
            secrets,
            has_ports: value.get("ports").is_some_and(|p| !p.is_null()),
            container_name: value.get("container_name").map(text_of),
            hostname: value.get("hostname").map(text_of),
            healthcheck_test: value.get("healthcheck").and_then(|h| h.get("test")).map(words),
            depends_on,
            security_opt: sequence(value.get("security_opt")).iter().map(text_of).collect(),
            privileged: value.get("privileged").and_then(Value::as_bool).unwrap_or(false),
            cap_add: sequence(value.get("cap_add")).iter().map(text_of).collect(),
        }
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => serde_yaml_ng::to_string(other).unwrap_or_default().trim().to_string(),
    }
}

fn words(value: &Value) -> Vec<String> {
    match value {
        Value::Sequence(list) => list.iter().map(text_of).collect(),
        other => text_of(other).split_whitespace().map(str::to_string).collect(),
    }
}

fn sequence(value: Option<&Value>) -> Vec<Value> {
    value.and_then(Value::as_sequence).cloned().unwrap_or_default()
}

fn keys(value: Option<&Value>) -> Vec<String> {
    value.and_then(Value::as_mapping).map(|m| m.keys().map(text_of).collect()).unwrap_or_default()
}

/// The variables of an env file (`NAME=value` lines; `#` comments and blank lines skipped).
pub fn env_file_vars(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.trim().to_string(), v.trim().to_string())))
        .collect()
}
