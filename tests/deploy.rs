#![allow(clippy::expect_used, clippy::unwrap_used)]
//! The deploy files checked against the repository, without a Docker engine or systemd: docker-compose.yml,
//! deploy/Dockerfile (and its .dockerignore), the systemd units and the env file examples. Each test is a promise
//! docs/deploy.md makes: the files they name exist, the programs they start are the workspace's, the variables
//! they set are read, each container's config loads with exactly its own environment, workers scale, the broker
//! keeps its data, the image runs as a service user with no secret in it, the units leave the sandbox its
//! namespaces, and so do the containers, through a seccomp profile that is Docker's default plus exactly the
//! sandbox helper's calls (deploy/seccomp.rs).

#[path = "deploy/compose.rs"]
mod compose;
#[path = "deploy/dockerfile.rs"]
mod dockerfile;
#[path = "deploy/overrides.rs"]
mod overrides;
#[path = "deploy/repo.rs"]
mod repo;
#[path = "deploy/seccomp.rs"]
mod seccomp;
#[path = "deploy/setup.rs"]
mod setup;
#[path = "deploy/units.rs"]
mod units;

use minibot_config::Config;
use overrides::Env;
use setup::{COMPOSE, assert_none, deploy, join};
use std::path::Path;

#[test]
fn every_build_names_a_context_and_dockerfile_that_exist() {
    let d = deploy();
    let mut problems = vec![];
    for (name, service) in &d.compose.services {
        if let Some((context, file)) = &service.build {
            if !d.repo.path(context).is_dir() {
                problems.push(format!("service {name}: build context {context} is not a folder"));
            }
            if !d.repo.path(&join(context, file)).is_file() {
                problems.push(format!("service {name}: dockerfile {} does not exist", join(context, file)));
            }
        }
    }
    assert_none(problems, "builds that cannot start");
}

#[test]
fn every_file_the_compose_file_names_exists_or_is_made_from_an_example() {
    let d = deploy();
    let mut named: Vec<(String, String)> = vec![];
    for (name, service) in &d.compose.services {
        for mount in service.volumes.iter().filter(|m| m.is_bind()) {
            named.push((format!("service {name}: volume"), mount.source.trim_start_matches("./").to_string()));
        }
        for file in &service.env_files {
            named.push((format!("service {name}: env_file"), file.trim_start_matches("./").to_string()));
        }
        for secret in &service.secrets {
            if !d.compose.secret_files.contains_key(secret) {
                named.push((format!("service {name}: secret {secret} (no top-level secrets: entry)"), String::new()));
            }
        }
    }
    for (secret, file) in &d.compose.secret_files {
        named.push((format!("secret {secret}"), file.trim_start_matches("./").to_string()));
    }
    assert!(!named.is_empty(), "the compose file names no file at all: the parser lost them");
    let mut problems = vec![];
    for (what, file) in named {
        if file.is_empty() || d.repo.path(&file).exists() {
            if file.is_empty() {
                problems.push(what);
            }
            continue;
        }
        // A file that holds secrets is made by the user from its committed example and never committed itself.
        let example = format!("{file}.example");
        if !d.repo.path(&example).is_file() {
            problems.push(format!("{what} {file} does not exist, and there is no {example} to make it from"));
        } else if !d.repo.git_ignores(&file) {
            problems.push(format!("{what} {file} is made from {example} but git does not ignore it"));
        }
    }
    assert_none(problems, "files the compose file names that a user cannot have");
}

#[test]
fn every_file_the_dockerfile_copies_is_in_the_build_context() {
    let d = deploy();
    let stages: Vec<String> = d.dockerfile.stages.iter().filter_map(|s| s.name.clone()).collect();
    let mut problems = vec![];
    for stage in &d.dockerfile.stages {
        for copy in stage.copies() {
            match &copy.from {
                Some(from) if !stages.contains(from) => problems.push(format!("COPY --from={from}: no such stage")),
                Some(_) => {}
                None => {
                    for source in &copy.sources {
                        if !d.repo.path(source).exists() {
                            problems.push(format!("COPY {source}: not in the repository"));
                        } else if source != "." && d.ignore.excludes(source) {
                            problems.push(format!("COPY {source}: the .dockerignore keeps it out of the context"));
                        }
                    }
                }
            }
        }
    }
    // The prompts are compiled in (include_str!), so the sources' own files must reach the build stage.
    for needed in ["Cargo.toml", "Cargo.lock", "prompts/main_agent_system.md", "agents"] {
        if d.ignore.excludes(needed) {
            problems.push(format!("{needed} is needed by the build but the .dockerignore excludes it"));
        }
    }
    assert_none(problems, "copies that fail the build");
}

#[test]
fn every_program_the_deploy_files_start_is_a_workspace_binary() {
    let d = deploy();
    let mut started: Vec<(String, String)> = vec![];
    let runtime = d.dockerfile.runtime();
    for keyword in ["ENTRYPOINT", "CMD"] {
        if let Some(words) = runtime.exec_form(keyword) {
            started.push((format!("{} {keyword}", d.dockerfile_path), words[0].clone()));
            if keyword == "ENTRYPOINT" {
                break;
            }
        }
    }
    for (name, service) in d.ours() {
        started.push((format!("service {name}"), d.program(service).0));
    }
    for unit in &d.units {
        let program = unit.exec_program().unwrap_or_else(|| panic!("{}: no ExecStart", unit.file));
        let base = Path::new(&program).file_name().unwrap().to_string_lossy().into_owned();
        started.push((format!("{} ExecStart", unit.file), base));
    }
    let mut problems: Vec<String> = started
        .iter()
        .filter(|(_, program)| !d.repo.binaries.contains(program))
        .map(|(what, program)| format!("{what} starts `{program}`, which no workspace package builds"))
        .collect();

    // What the image ships must be built, and the sandbox helper must sit next to the programs that run it.
    let mut shipped: Vec<(String, String)> = vec![];
    for copy in runtime.copies().into_iter().filter(|c| c.from.is_some()) {
        for source in &copy.sources {
            if let Some(binary) = source.rsplit_once("/target/release/").map(|(_, b)| b.to_string()) {
                shipped.push((binary, copy.destination.trim_end_matches('/').to_string()));
            }
        }
    }
    for (binary, _) in &shipped {
        if !d.repo.binaries.contains(binary) {
            problems.push(format!("the image copies target/release/{binary}, which no workspace package builds"));
        }
    }
    let folder_of = |b: &str| shipped.iter().find(|(name, _)| name == b).map(|(_, dir)| dir.clone());
    let helper = folder_of("minibot-sandbox");
    for program in ["minibot", "minibot-worker"] {
        if folder_of(program).is_none() || folder_of(program) != helper {
            problems.push(format!("{program} and minibot-sandbox must be copied into the same folder: {shipped:?}"));
        }
    }
    for stage in &d.dockerfile.stages {
        for run in stage.all("RUN").filter(|r| r.args.contains("cargo build") || r.args.contains("cargo chef cook")) {
            let words: Vec<&str> = run.args.split_whitespace().collect();
            for package in words.windows(2).filter(|w| w[0] == "-p" || w[0] == "--package").map(|w| w[1]) {
                if !d.repo.packages.contains(package) {
                    problems.push(format!("`{}` builds package {package}, which is not in the workspace", run.args));
                }
            }
        }
    }
    assert_none(problems, "programs the deploy files cannot start");
}

/// Every `MINIBOT__…` name in the deploy files, comments included, reaches a key of the config.
#[test]
fn minibot_variables_name_real_config_keys() {
    let d = deploy();
    let defaults = Config::defaults(&d.repo.root);
    let mut files = vec![COMPOSE.to_string()];
    for entry in std::fs::read_dir(d.repo.path("deploy")).unwrap().flatten() {
        files.push(format!("deploy/{}", entry.file_name().to_string_lossy()));
    }
    let mut seen = 0;
    let mut problems = vec![];
    for file in &files {
        let text = d.repo.read(file);
        for (at, _) in text.match_indices("MINIBOT__") {
            let name: String =
                text[at..].chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect();
            // The pattern as the docs write it, not a variable.
            if name.starts_with("MINIBOT__SECTION__") {
                continue;
            }
            seen += 1;
            if let Err(why) = overrides::check_name(&defaults, name.trim_end_matches('_')) {
                problems.push(format!("{file}: {why}"));
            }
        }
    }
    assert!(seen >= 3, "the deploy files set the bot token, labels and more through MINIBOT__ variables");
    assert_none(problems, "MINIBOT__ variables that set nothing");
}

#[test]
fn each_container_loads_its_config_and_only_the_orchestrator_gets_the_bot_token() {
    let d = deploy();
    let (broker_name, broker) = d.broker();
    let broker_env = d.env_files(broker);
    let broker_env: Env = broker_env.into_iter().chain(broker.environment.iter().cloned()).collect();
    let mut labelled = vec![];
    let mut problems = vec![];
    for (name, service) in d.ours() {
        let config = d.effective_config(name, service);
        let token = &config.channels.telegram.bot_token;
        if d.is_worker(service) {
            if !token.is_empty() {
                problems.push(format!("worker service {name} gets the Telegram bot token; workers never need it"));
            }
            let tree = serde_json::to_value(&*config).unwrap();
            if tree["worker"]["labels"].as_array().is_some_and(|l| !l.is_empty()) {
                labelled.push(name.clone());
            }
        } else if token.is_empty() {
            problems.push(format!("service {name} runs the daemon but gets no Telegram bot token from its env file"));
        }
        if config.tasks.backend.as_str() != "rabbitmq" {
            problems.push(format!("service {name}: tasks.backend is {}, not rabbitmq", config.tasks.backend.as_str()));
        }
        // amqp://user:password@host:port/vhost: the broker's service, with the account the broker creates.
        let url = &config.rabbitmq.broker_url;
        let (account, address) =
            url.split_once("://").and_then(|(_, rest)| rest.split_once('@')).expect("broker_url has an account");
        let host = address.split([':', '/']).next().unwrap_or_default();
        if host != broker_name {
            problems.push(format!("service {name}: broker_url points at `{host}`, not the {broker_name} service"));
        }
        let (user, password) = account.split_once(':').unwrap_or((account, ""));
        let created = (broker_env.get("RABBITMQ_DEFAULT_USER"), broker_env.get("RABBITMQ_DEFAULT_PASS"));
        if created != (Some(&user.to_string()), Some(&password.to_string())) {
            problems
                .push(format!("service {name}: broker_url logs in as `{user}`, not as the account the broker creates"));
        }
        if user == "guest" {
            problems.push(format!("service {name}: RabbitMQ's `guest` account only works from the broker's own host"));
        }
        // The data folder holds the conversations and task records: it must be a volume, or they go with the
        // container.
        if !d.is_worker(service) {
            let db = minibot_config::sqlite_path_from_url(&config.memory.sqlite_url).expect("a SQLite path");
            let db = d.in_container(service, &config, &db);
            let kept = service.volumes.iter().any(|m| !m.is_bind() && db.starts_with(&m.target));
            if !kept {
                problems.push(format!("service {name}: {} is not on a named volume", db.display()));
            }
        }
    }
    if labelled.is_empty() {
        problems.push("no worker service shows how to offer a label (MINIBOT__WORKER__LABELS)".into());
    }
    assert_none(problems, "containers that would not work as documented");
}

#[test]
fn every_other_variable_set_is_read_by_the_program_or_its_config() {
    let d = deploy();
    let mut set: Vec<(String, String, Option<String>)> = vec![];
    for (name, service) in d.ours() {
        let (config_file, _) = d.mounted_config(service);
        for variable in d.environment(service).into_keys() {
            set.push((format!("service {name}"), variable, Some(config_file.clone())));
        }
        for file in &service.env_files {
            let path = if d.repo.path(file).is_file() { file.clone() } else { format!("{file}.example") };
            // Commented examples (`# NAME=`) promise the variable works too.
            for line in d.repo.read(&path).lines() {
                let line = line.trim_start_matches(['#', ' ']);
                if let Some((variable, _)) = line.split_once('=')
                    && !variable.is_empty()
                    && variable.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                {
                    set.push((path.clone(), variable.to_string(), Some(config_file.clone())));
                }
            }
        }
    }
    for (variable, _) in d.dockerfile.runtime().env() {
        set.push((d.dockerfile_path.clone(), variable, None));
    }
    for unit in &d.units {
        for (variable, _) in unit.environment() {
            set.push((unit.file.clone(), variable, None));
        }
    }
    let mut problems = vec![];
    for (where_, variable, config_file) in &set {
        if variable.starts_with("MINIBOT__") {
            continue; // config keys: checked by minibot_variables_name_real_config_keys
        }
        let in_config = config_file.as_ref().is_some_and(|f| d.repo.read(f).contains(&format!("${{{variable}}}")));
        if !in_config && d.repo.sources_reading(variable).is_empty() {
            problems.push(format!("{where_} sets {variable}, which neither the code nor the config reads"));
        }
    }
    assert!(set.len() >= 5, "the deploy files set variables; the parsers found only {set:?}");
    assert_none(problems, "variables that do nothing");
}

#[test]
fn the_image_is_built_with_the_workspace_toolchain_and_cached_dependencies() {
    let d = deploy();
    let rust: Vec<&str> =
        d.dockerfile.stages.iter().map(|s| s.image.as_str()).filter(|i| i.starts_with("rust:")).collect();
    assert!(!rust.is_empty(), "the builder is the official rust image");
    let wanted = format!("rust:{}", d.repo.rust_version);
    for image in &rust {
        let matches = image.strip_prefix(&wanted).is_some_and(|rest| rest.is_empty() || rest.starts_with('-'));
        assert!(matches, "builder {image} is not Rust {} (the workspace's rust-version)", d.repo.rust_version);
    }
    let runs: Vec<String> = d.dockerfile.stages.iter().flat_map(|s| s.all("RUN").map(|r| r.args.clone())).collect();
    assert!(runs.iter().any(|r| r.contains("cargo chef prepare")), "a planner stage prepares the recipe");
    let build = d
        .dockerfile
        .stages
        .iter()
        .find(|s| s.all("RUN").any(|r| r.args.contains("cargo build --release")))
        .expect("a stage runs cargo build --release");
    let order: Vec<&dockerfile::Instruction> = build.instructions.iter().collect();
    let cook = order.iter().position(|i| i.keyword == "RUN" && i.args.contains("cargo chef cook"));
    let sources = order.iter().position(|i| i.keyword == "COPY" && i.args.split_whitespace().next() == Some("."));
    let built = order.iter().position(|i| i.keyword == "RUN" && i.args.contains("cargo build --release"));
    assert!(
        matches!((cook, sources, built), (Some(c), Some(s), Some(b)) if c < s && s < b),
        "dependencies are cooked before the sources are copied, and built after: {order:?}"
    );
    let packages = |args: &str| -> Vec<String> {
        let words: Vec<&str> = args.split_whitespace().collect();
        words.windows(2).filter(|w| w[0] == "-p").map(|w| w[1].to_string()).collect()
    };
    let (cook, built) = (&order[cook.unwrap()].args, &order[built.unwrap()].args);
    assert_eq!(packages(cook), packages(built), "the cooked dependencies are those of the packages built");
    assert!(cook.contains("--locked") && built.contains("--locked"), "both use Cargo.lock as committed");
}

#[test]
fn the_image_runs_as_a_service_user_and_carries_no_secret() {
    let d = deploy();
    let runtime = d.dockerfile.runtime();
    let user = runtime.all("USER").last().map(|u| u.args.clone()).expect("the runtime stage sets USER");
    let name = user.split(':').next().unwrap_or_default();
    assert!(!matches!(name, "" | "root" | "0"), "the image runs as root (USER {user})");
    let mut problems = vec![];
    for stage in &d.dockerfile.stages {
        let mut names: Vec<String> = stage.env().into_iter().map(|(n, _)| n).collect();
        names.extend(stage.all("ARG").map(|a| a.args.split('=').next().unwrap_or_default().to_string()));
        for name in names {
            let upper = name.to_ascii_uppercase();
            if ["KEY", "TOKEN", "PASS", "SECRET"].iter().any(|s| upper.contains(s)) {
                problems.push(format!("{name} is set at build time: it would stay in the image's history"));
            }
        }
    }
    // Whatever holds secrets stays out of the build context, so no COPY can take it into a layer.
    let mut secret_files: Vec<String> = vec![".env".into(), "config.toml".into(), "secrets.vault.yml".into()];
    for service in d.compose.services.values() {
        secret_files.extend(service.env_files.iter().map(|f| f.trim_start_matches("./").to_string()));
    }
    secret_files.extend(d.compose.secret_files.values().map(|f| f.trim_start_matches("./").to_string()));
    for file in secret_files {
        if !d.ignore.excludes(&file) {
            problems.push(format!("{file} would be sent to the image build: add it to the .dockerignore"));
        }
    }
    assert_none(problems, "secrets that could reach the image");
}

#[test]
fn workers_scale_and_the_broker_keeps_its_data() {
    let d = deploy();
    let mut problems = vec![];
    let workers: Vec<&String> = d.ours().filter(|(_, s)| d.is_worker(s)).map(|(n, _)| n).collect();
    assert!(!workers.is_empty(), "a worker service");
    for name in workers {
        let service = &d.compose.services[name];
        if service.container_name.is_some() {
            problems.push(format!("worker {name} has a container_name: `--scale {name}=2` would fail"));
        }
        if service.has_ports {
            problems.push(format!("worker {name} publishes ports: a second replica could not bind them"));
        }
        // The worker id is the host name plus the pid, else MINIBOT_WORKER_ID: replicas must not share either.
        if service.hostname.is_some() || d.environment(service).contains_key("MINIBOT_WORKER_ID") {
            problems.push(format!("worker {name} fixes its hostname or MINIBOT_WORKER_ID: replicas share one id"));
        }
    }
    let (broker_name, broker) = d.broker();
    let test = broker.healthcheck_test.clone().unwrap_or_default();
    if test.len() < 2 || !matches!(test[0].as_str(), "CMD" | "CMD-SHELL") {
        problems.push(format!("{broker_name} has no healthcheck to wait for: {test:?}"));
    }
    let data = broker.volumes.iter().find(|m| m.target == "/var/lib/rabbitmq");
    match data {
        Some(mount) if !mount.is_bind() && d.compose.volumes.contains(&mount.source) => {}
        other => problems.push(format!("{broker_name} keeps /var/lib/rabbitmq on no declared named volume: {other:?}")),
    }
    // RabbitMQ's data folder is named after the node, and the node after the host name.
    if broker.hostname.is_none() {
        problems.push(format!("{broker_name} has no fixed hostname: a re-created container starts with empty queues"));
    }
    for (name, service) in d.ours() {
        if service.depends_on.get(broker_name).map(String::as_str) != Some("service_healthy") {
            problems.push(format!("{name} does not wait for {broker_name} to be healthy"));
        }
        for mount in service.volumes.iter().filter(|m| !m.is_bind()) {
            if !d.compose.volumes.contains(&mount.source) {
                problems.push(format!("{name} mounts volume {} that is not declared", mount.source));
            }
        }
    }
    assert_none(problems, "scaling and persistence");
}

#[test]
fn units_run_as_a_service_user_restart_and_identify_each_worker() {
    let d = deploy();
    let mut problems = vec![];
    for unit in &d.units {
        let file = &unit.file;
        match unit.get("User") {
            None | Some("root") | Some("0") => problems.push(format!("{file} runs as root")),
            Some(_) => {}
        }
        if !matches!(unit.get("Restart"), Some("on-failure" | "always" | "on-abnormal")) {
            problems.push(format!("{file} is not restarted when it fails"));
        }
        let writable: Vec<&str> = unit.all("ReadWritePaths").flat_map(str::split_whitespace).collect();
        if unit.get("ProtectSystem") == Some("strict")
            && let Some(dir) = unit.get("WorkingDirectory")
            && !writable.iter().any(|w| w.trim_start_matches('-') == dir)
        {
            problems.push(format!("{file}: the working directory {dir} is read-only under ProtectSystem=strict"));
        }
    }
    let worker = d.units.iter().find(|u| u.file.contains('@')).expect("a templated worker unit");
    let id = worker.environment().into_iter().find(|(n, _)| n == "MINIBOT_WORKER_ID").map(|(_, v)| v);
    if !id.as_deref().is_some_and(|v| v.contains("%i") && v.contains("%H")) {
        problems
            .push(format!("{}: MINIBOT_WORKER_ID must name the host and the instance (%H-%i): {id:?}", worker.file));
    }
    if !worker.all("EnvironmentFile").any(|f| f.trim_start_matches('-') == "/etc/minibot/worker.env") {
        problems.push(format!("{}: no optional /etc/minibot/worker.env for labels and overrides", worker.file));
    }
    let daemon = d.units.iter().find(|u| !u.file.contains('@')).expect("the daemon unit");
    let args = daemon.exec_args();
    if args.iter().any(|a| a == "console" || a == "worker") {
        problems.push(format!("{} must run the daemon, not {args:?}", daemon.file));
    }
    assert_none(problems, "units that would not serve");
}

/// The contain sandbox creates user, pid and mount namespaces and mounts a /proc of its own. The kernel refuses
/// that /proc while part of the old one is covered (checked on this kernel: a read-only bind on /proc/sys, as
/// ProtectKernelTunables makes, turns `unshare --user --pid --mount-proc` into EPERM).
#[test]
fn units_leave_the_sandbox_its_namespaces() {
    let d = deploy();
    let mut problems = vec![];
    for unit in &d.units {
        for (key, allowed) in [
            ("RestrictNamespaces", &["no", "false"][..]),
            ("PrivateUsers", &["no", "false"][..]),
            ("ProtectKernelTunables", &["no", "false"][..]),
            ("ProtectKernelLogs", &["no", "false"][..]),
            ("ProtectProc", &["default"][..]),
            ("ProcSubset", &["all"][..]),
        ] {
            if let Some(value) = unit.get(key)
                && !allowed.contains(&value)
            {
                problems.push(format!("{}: {key}={value} breaks the contain sandbox", unit.file));
            }
        }
        if unit.get("NoNewPrivileges") != Some("yes") {
            problems.push(format!("{}: NoNewPrivileges=yes costs the sandbox nothing; set it", unit.file));
        }
    }
    assert_none(problems, "hardening that breaks the sandbox");
}
