//! The sandbox this host gives the commands the model runs, and whether the configured modes can run here
//! (`minibot` refuses to start when one cannot: a mode is never weakened in silence).

use super::report::Report;
use minibot_config::Config;
use minibot_tools::exec::sandbox;
use std::io::Write;

/// The `sandbox` line of what the kernel offers, whatever the config asks.
pub fn host_layers(report: &mut Report<impl Write>) {
    let Some(helper) = minibot_sandbox::helper() else {
        report.warn(
            "sandbox",
            format!("the `{}` helper is not found: `contain` mode cannot run", minibot_sandbox::locate::HELPER_NAME),
            format!("install it next to minibot, or set {}", minibot_sandbox::locate::HELPER_ENV),
        );
        return;
    };
    let capabilities = match minibot_sandbox::probe(&helper) {
        Ok(capabilities) => capabilities,
        Err(error) => {
            report.warn("sandbox", format!("cannot ask the kernel: {error}"), "");
            return;
        }
    };
    let mut layers = Vec::new();
    if capabilities.landlock_abi > 0 {
        layers.push(format!("Landlock ABI {}", capabilities.landlock_abi));
    } else {
        layers.push("no Landlock".into());
    }
    layers.push(if capabilities.seccomp { "seccomp".into() } else { "no seccomp".into() });
    match &capabilities.namespaces_refused {
        None => layers.push("user/pid/mount namespaces".into()),
        Some(why) => layers.push(format!("no namespaces ({why}; a subreaper stands in)")),
    }
    let text = format!("host offers {}", layers.join(", "));
    match capabilities.missing() {
        None => report.ok("sandbox", text),
        Some(missing) => report.warn(
            "sandbox",
            format!("{text}: `contain` mode cannot run here: {missing}"),
            "use another sandbox_mode for [tools.bash] and [tools.python_exec], or a host that has it",
        ),
    }
}

/// The `commands` line: the modes of the enabled command tools, planned as at start-up
/// ([`sandbox::check`]).
pub async fn modes(config: &Config, report: &mut Report<impl Write>) {
    let tools = &config.tools;
    let mut enabled = Vec::new();
    if tools.bash.enabled {
        enabled.push(format!("tools.bash: {}", tools.bash.sandbox_mode.as_str()));
    }
    if tools.python_exec.enabled {
        enabled.push(format!("tools.python_exec: {}", tools.python_exec.sandbox_mode.as_str()));
    }
    if enabled.is_empty() {
        report.skip("commands", "no command tools enabled ([tools.bash], [tools.python_exec])");
        return;
    }
    // Only a root that exists already, and private temp folders in a throwaway place: the check must not make
    // folders in the user's state (start-up makes `sandbox-tmp` next to the databases; doctor only plans).
    let storage = &tools.file_storage;
    let root = config.resolve_path(&storage.root_dir);
    let files = (storage.enabled && root.is_dir())
        .then(|| minibot_tools::files::ManagedRoot::create(&root, storage.allow_outside_root).ok())
        .flatten();
    let mut scope = sandbox::SandboxScope::from_config(config, files.as_ref());
    scope.temp_root = std::env::temp_dir().join(format!("minibot-doctor-{}", std::process::id()));
    let mut planned = Ok(());
    if tools.bash.enabled {
        planned = sandbox::plan(&sandbox::bash_settings(&tools.bash), &scope).await.map(drop);
    }
    if tools.python_exec.enabled && planned.is_ok() {
        planned = sandbox::plan(&sandbox::python_settings(&tools.python_exec), &scope).await.map(drop);
    }
    let _ = std::fs::remove_dir_all(&scope.temp_root);
    match planned {
        Ok(()) => report.ok("commands", enabled.join("; ")),
        Err(unavailable) => {
            let fix = format!(
                "set [{}] sandbox_mode to a mode this host has (`basic` always runs), or enabled = false",
                unavailable.section
            );
            report.fail("commands", unavailable.to_string(), fix);
        }
    }
}
