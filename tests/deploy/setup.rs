//! What the checks share: the parsed deploy files, and each compose service seen the way its container sees
//! itself (its program, its environment, its config).

use crate::compose::{Compose, Service, env_file_vars};
use crate::dockerfile::{DockerIgnore, Dockerfile};
use crate::overrides::{self, Env};
use crate::repo::Repo;
use crate::units::Unit;
use minibot_config::Config;
use std::path::Path;
use std::sync::OnceLock;

pub const COMPOSE: &str = "docker-compose.yml";
pub const UNITS: &[&str] = &["deploy/minibot.service", "deploy/minibot-worker@.service"];

pub struct Deploy {
    pub repo: Repo,
    pub compose: Compose,
    /// The Dockerfile the services build from, by its path in the repository.
    pub dockerfile_path: String,
    pub dockerfile: Dockerfile,
    pub ignore: DockerIgnore,
    pub units: Vec<Unit>,
}

pub fn deploy() -> &'static Deploy {
    static DEPLOY: OnceLock<Deploy> = OnceLock::new();
    DEPLOY.get_or_init(|| {
        let repo = Repo::open();
        let compose = Compose::parse(&repo.read(COMPOSE));
        let builds: Vec<String> = compose
            .services
            .values()
            .filter_map(|s| s.build.as_ref())
            .map(|(context, file)| join(context, file))
            .collect();
        let dockerfile_path = builds.first().cloned().expect("a service builds the minibot image");
        assert!(builds.iter().all(|b| *b == dockerfile_path), "every service builds the same image: {builds:?}");
        let dockerfile = Dockerfile::parse(&repo.read(&dockerfile_path));
        // BuildKit reads <Dockerfile>.dockerignore next to the Dockerfile first, then .dockerignore in the context.
        let ignore_file = [format!("{dockerfile_path}.dockerignore"), ".dockerignore".to_string()]
            .into_iter()
            .find(|f| repo.path(f).is_file())
            .expect("a .dockerignore keeps local data and secrets out of the build context");
        let ignore = DockerIgnore::parse(&repo.read(&ignore_file));
        let units = UNITS.iter().map(|f| Unit::parse(f, &repo.read(f))).collect();
        Deploy { repo, compose, dockerfile_path, dockerfile, ignore, units }
    })
}

/// `context` + `file` as a repository path (`.` + `deploy/Dockerfile` → `deploy/Dockerfile`).
pub fn join(context: &str, file: &str) -> String {
    let joined = Path::new(context.trim_start_matches("./")).join(file);
    joined.to_string_lossy().trim_start_matches("./").to_string()
}

impl Deploy {
    /// Services built from the repository's Dockerfile: the ones that run our programs.
    pub fn ours(&self) -> impl Iterator<Item = (&String, &Service)> {
        self.compose.services.iter().filter(|(_, s)| s.build.is_some())
    }

    pub fn broker(&self) -> (&String, &Service) {
        self.compose
            .services
            .iter()
            .find(|(_, s)| s.image.as_deref().is_some_and(|i| i.starts_with("rabbitmq")))
            .expect("a rabbitmq service")
    }

    /// What a container of ours runs: its entrypoint's program, else the image's.
    pub fn program(&self, service: &Service) -> (String, Vec<String>) {
        let runtime = self.dockerfile.runtime();
        let entrypoint = service.entrypoint.clone().or_else(|| runtime.exec_form("ENTRYPOINT")).unwrap_or_default();
        let command = service.command.clone().or_else(|| runtime.exec_form("CMD")).unwrap_or_default();
        let mut words = entrypoint.into_iter().chain(command);
        (words.next().expect("the container runs something"), words.collect())
    }

    pub fn is_worker(&self, service: &Service) -> bool {
        self.program(service).0 == "minibot-worker"
    }

    /// The env files a service reads, as they will be once the user made them from the examples, with the
    /// blanks the examples leave filled in.
    pub fn env_files(&self, service: &Service) -> Env {
        let mut env = Env::new();
        for file in &service.env_files {
            let path = if self.repo.path(file).is_file() { file.clone() } else { format!("{file}.example") };
            for (name, value) in env_file_vars(&self.repo.read(&path)) {
                let value = if value.is_empty() { "123456789:AAfilled-in-by-the-user".to_string() } else { value };
                env.insert(name, value);
            }
        }
        env
    }

    /// The environment a container of a service starts with: its env files, then `environment:` (which wins).
    pub fn environment(&self, service: &Service) -> Env {
        let mut env = self.env_files(service);
        for (name, value) in &service.environment {
            env.insert(name.clone(), interpolate(value));
        }
        for (name, value) in self.dockerfile.runtime().env() {
            env.entry(name).or_insert(value);
        }
        env
    }

    /// The config file a container reads: the bind mount at its `--config` path (or `MINIBOT_CONFIG`), else the
    /// copy the image carries. Returns the repository file and the folder it sits in inside the container.
    pub fn mounted_config(&self, service: &Service) -> (String, String) {
        let (_, args) = self.program(service);
        let env = self.environment(service);
        let in_container = args
            .windows(2)
            .find(|pair| pair[0] == "--config")
            .map(|pair| pair[1].clone())
            .or_else(|| env.get("MINIBOT_CONFIG").cloned())
            .expect("the container is told its config (--config or MINIBOT_CONFIG)");
        let folder = Path::new(&in_container).parent().unwrap().to_string_lossy().into_owned();
        if let Some(mount) = service.volumes.iter().find(|m| m.target == in_container && m.is_bind()) {
            return (mount.source.trim_start_matches("./").to_string(), folder);
        }
        let runtime = self.dockerfile.runtime();
        let workdir = runtime.all("WORKDIR").last().map(|w| w.args.clone()).unwrap_or_else(|| "/".into());
        let copy = runtime
            .copies()
            .into_iter()
            .find(|c| c.from.is_none() && Path::new(&workdir).join(&c.destination) == Path::new(&in_container))
            .unwrap_or_else(|| panic!("{in_container} is neither mounted nor in the image"));
        (copy.sources[0].clone(), folder)
    }

    pub fn effective_config(&self, name: &str, service: &Service) -> Config {
        let (file, _) = self.mounted_config(service);
        overrides::effective(&self.repo.path(&file), &self.environment(service))
            .unwrap_or_else(|e| panic!("service {name}: its config does not load with its environment: {e}"))
    }

    /// Where a path the config resolves lies inside the container (the config is loaded from the repository).
    pub fn in_container(&self, service: &Service, config: &Config, written: &str) -> std::path::PathBuf {
        let (_, folder) = self.mounted_config(service);
        let resolved = config.resolve_path(written);
        let relative = resolved.strip_prefix(&config.base_dir).unwrap_or(&resolved);
        Path::new(&folder).join(relative)
    }
}

/// Compose's `${VAR:-default}`, `${VAR-default}` and `${VAR:?message}` as they resolve with the variable unset.
fn interpolate(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        let inner = &rest[start + 2..start + end];
        assert!(!inner.contains(":?"), "`{value}` needs a variable set in the shell; use an env file instead");
        out.push_str(inner.split_once(":-").or_else(|| inner.split_once('-')).map_or("", |(_, d)| d));
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out
}

pub fn assert_none(problems: Vec<String>, what: &str) {
    let problems: std::collections::BTreeSet<String> = problems.into_iter().collect();
    let problems: Vec<String> = problems.into_iter().collect();
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}
