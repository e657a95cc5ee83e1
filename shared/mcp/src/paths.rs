//! Where a stdio server's `command` and `cwd` point when written relative.

use minibot_config::Config;
use minibot_config::schema::McpServerSection;

/// Resolves a relative `cwd`, and a `command` written as a path (it has a `/`), against the config file's folder,
/// as every other path in the config does; a bare command name stays a `PATH` lookup.
pub(crate) fn resolve_launch_paths(server: &mut McpServerSection, config: &Config) {
    if let Some(cwd) = server.cwd.as_deref().filter(|c| !c.trim().is_empty()) {
        server.cwd = Some(config.resolve_path(cwd).to_string_lossy().into_owned());
    }
    if let Some(command) = server.command.as_deref().filter(|c| c.contains('/')) {
        server.command = Some(config.resolve_path(command).to_string_lossy().into_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_sit_under_the_config_folder() {
        let config = Config::defaults("/etc/minibot");
        let mut server = McpServerSection {
            command: Some("bin/server".into()),
            cwd: Some("servers/dice".into()),
            ..Default::default()
        };
        resolve_launch_paths(&mut server, &config);
        assert_eq!(server.command.as_deref(), Some("/etc/minibot/bin/server"));
        assert_eq!(server.cwd.as_deref(), Some("/etc/minibot/servers/dice"));

        let mut server =
            McpServerSection { command: Some("python3".into()), cwd: Some("/srv/x".into()), ..Default::default() };
        resolve_launch_paths(&mut server, &config);
        assert_eq!(server.command.as_deref(), Some("python3"), "a bare name is a PATH lookup");
        assert_eq!(server.cwd.as_deref(), Some("/srv/x"));
    }
}
