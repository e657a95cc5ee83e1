use std::path::PathBuf;

/// The path of a workspace binary built in the same target folder as the running test
/// (`cargo test --workspace` builds every binary before it runs a test).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test-binary> → target/<profile>/<name>
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).map(PathBuf::from).unwrap_or_default();
    let path = profile_dir.join(name);
    assert!(
        path.exists(),
        "binary {} is missing; build it with `cargo build --workspace` (cargo test --workspace does)",
        path.display()
    );
    path
}
