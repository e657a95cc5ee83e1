//! Preview then install, from a local archive, a local folder and a local HTTP server: what lands on disk,
//! what the lock file records, and the refusals a user relies on (hash changed, name taken, several skills).

use super::{Route, Setup, serve, skill_md, snapshot, tar_gz, zip};
use minibot_skills::InstallRequest;
use std::collections::HashMap;

/// A GitHub-style tarball: one top folder, a pax header, two skills and a broken one.
fn repo_tarball() -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    let mut pax = tar::Header::new_ustar();
    let record = b"52 comment=0123456789abcdef0123456789abcdef01234567\n";
    pax.set_entry_type(tar::EntryType::XGlobalHeader);
    pax.set_size(record.len() as u64);
    builder.append_data(&mut pax, "pax_global_header", &record[..]).unwrap();
    let files: [(&str, String); 5] = [
        ("repo-0123/README.md", "# repo".into()),
        ("repo-0123/skills/pdf/SKILL.md", skill_md("pdf", "Work with PDF files")),
        ("repo-0123/skills/pdf/scripts/split.py", "print('split')".into()),
        ("repo-0123/skills/sheets/SKILL.md", skill_md("sheets", "Work with spreadsheets")),
        ("repo-0123/skills/broken/SKILL.md", "no frontmatter here".into()),
    ];
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, path, content.as_bytes()).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

#[tokio::test]
async fn a_local_archive_previews_then_installs_with_its_hash() {
    let setup = Setup::new();
    let archive = setup.dir.path().join("pdf.tar.gz");
    let skill = skill_md("pdf-tools", "Split and merge PDFs");
    std::fs::write(&archive, tar_gz(&[("pdf-tools/SKILL.md", skill.as_bytes()), ("pdf-tools/ref/a.md", b"A")]))
        .unwrap();
    let before = snapshot(&setup.write_dir());

    let preview = setup.preview("./pdf.tar.gz").await;
    assert_eq!(snapshot(&setup.write_dir()), before, "a preview writes nothing");
    assert_eq!(preview["ok"], true);
    let found = &preview["skills"][0];
    assert_eq!(found["name"], "pdf-tools");
    assert_eq!(found["description"], "Split and merge PDFs");
    assert_eq!(found["skill_path"], ".");
    assert_eq!(found["files"], serde_json::json!(["SKILL.md", "ref/a.md"]));
    assert_eq!(found["existing"], serde_json::Value::Null);
    assert!(found["instructions_preview"].as_str().unwrap().starts_with("# pdf-tools"));
    let hash = found["hash"].as_str().unwrap().to_string();
    assert_eq!(hash.len(), 64);

    let installed = setup.install(archive.to_str().unwrap(), &hash).await.unwrap();
    assert_eq!(installed["installed"], "pdf-tools");
    let target = setup.write_dir().join("pdf-tools");
    assert_eq!(installed["path"], target.to_string_lossy().as_ref());
    assert_eq!(std::fs::read_to_string(target.join("SKILL.md")).unwrap(), skill);
    assert_eq!(std::fs::read_to_string(target.join("ref/a.md")).unwrap(), "A");
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(setup.write_dir().join("skills-lock.json")).unwrap()).unwrap();
    let entry = &lock["skills"]["pdf-tools"];
    assert_eq!(lock["version"], 1);
    assert_eq!(entry["sourceType"], "local");
    assert_eq!(entry["computedHash"], hash.as_str());
    assert!(entry["installedAt"].as_str().unwrap().ends_with('Z'));
    assert_eq!(entry["resolvedUrl"], archive.to_string_lossy().as_ref());
    let leftovers: Vec<_> = std::fs::read_dir(setup.write_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "no staging folder left: {leftovers:?}");

    // Live right away, and a second install needs force.
    assert_eq!(setup.registry.get("pdf-tools").unwrap().description, "Split and merge PDFs");
    let again = setup.preview("./pdf.tar.gz").await;
    assert_eq!(again["skills"][0]["existing"]["path"], target.to_string_lossy().as_ref());
    let refused = setup.install("./pdf.tar.gz", &hash).await.unwrap_err();
    assert_eq!(refused.code(), "skill_exists");
    let request = InstallRequest {
        source: "./pdf.tar.gz".into(),
        install: true,
        expected_hash: Some(hash.clone()),
        force: true,
        ..Default::default()
    };
    setup.run(request).await.unwrap();
    assert!(target.join("SKILL.md").is_file());
}

#[tokio::test]
async fn a_changed_source_is_refused_by_its_hash_and_writes_nothing() {
    let setup = Setup::new();
    let archive = setup.dir.path().join("s.zip");
    std::fs::write(&archive, zip(&[("SKILL.md", skill_md("s", "first").as_bytes())])).unwrap();
    let hash = setup.preview("./s.zip").await["skills"][0]["hash"].as_str().unwrap().to_string();
    std::fs::write(&archive, zip(&[("SKILL.md", skill_md("s", "changed behind your back").as_bytes())])).unwrap();
    let before = snapshot(&setup.write_dir());

    let refused = setup.install("./s.zip", &hash).await.unwrap_err();
    assert_eq!(refused.code(), "hash_mismatch");
    assert!(refused.to_string().contains("preview it again"), "{refused}");
    // The content's new hash is not given away: installing it takes a preview that shows what it holds.
    let now = setup.preview("./s.zip").await["skills"][0]["hash"].as_str().unwrap().to_string();
    assert!(!refused.to_string().contains(&now), "{refused}");
    let missing = setup.run(InstallRequest { source: "./s.zip".into(), install: true, ..Default::default() }).await;
    assert_eq!(missing.unwrap_err().code(), "preview_required");
    assert_eq!(snapshot(&setup.write_dir()), before);
}

#[tokio::test]
async fn a_local_folder_installs_under_the_skills_name() {
    let setup = Setup::new();
    let source = setup.dir.path().join("src/My Skill");
    super::write_skill(&source, "", &skill_md("My Skill", "Mixed case"), &[("notes.txt", "n")]);
    let preview = setup.preview(source.to_str().unwrap()).await;
    let hash = preview["skills"][0]["hash"].as_str().unwrap().to_string();
    let installed = setup.install(source.to_str().unwrap(), &hash).await.unwrap();
    assert!(installed["path"].as_str().unwrap().ends_with("/skills/my-skill"), "{installed}");
    assert!(setup.registry.get("My Skill").is_some());
}

#[tokio::test]
async fn archives_over_http_install_from_tar_gz_and_zip() {
    let setup = Setup::new();
    let zipped = zip(&[
        ("bundle/alpha/SKILL.md", skill_md("alpha", "Zip one").as_bytes()),
        ("bundle/beta/SKILL.md", skill_md("beta", "Zip two").as_bytes()),
    ]);
    let routes = HashMap::from([
        ("/repo.tar.gz".to_string(), Route::ok(repo_tarball())),
        ("/skills.zip".to_string(), Route::ok(zipped)),
        ("/raw/SKILL.md".to_string(), Route::ok(skill_md("raw", "A lone file").into_bytes())),
        ("/moved".to_string(), Route::redirect("/raw/SKILL.md")),
        ("/away".to_string(), Route::redirect("http://example.com/SKILL.md")),
    ]);
    let addr = serve(routes).await;
    let url = |path: &str| format!("http://{addr}{path}");

    let preview = setup.preview(&url("/repo.tar.gz")).await;
    let names: Vec<&str> = preview["skills"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["pdf", "sheets"], "{preview}");
    assert_eq!(preview["invalid"][0]["skill_path"], "skills/broken");
    assert_eq!(preview["resolved_url"], url("/repo.tar.gz"));
    let pdf_hash = preview["skills"][0]["hash"].as_str().unwrap().to_string();
    let several = setup.install(&url("/repo.tar.gz"), &pdf_hash).await.unwrap_err();
    assert_eq!(several.code(), "skill_selection_required");
    assert!(several.to_string().contains("pdf, sheets"), "{several}");
    let request = InstallRequest {
        source: url("/repo.tar.gz"),
        skill: Some("PDF".into()),
        install: true,
        expected_hash: Some(pdf_hash),
        ..Default::default()
    };
    setup.run(request).await.unwrap();
    assert!(setup.write_dir().join("pdf/scripts/split.py").is_file());

    let zip_preview = setup.preview(&url("/skills.zip")).await;
    let beta = zip_preview["skills"].as_array().unwrap().iter().find(|s| s["name"] == "beta").unwrap().clone();
    let request = InstallRequest {
        source: url("/skills.zip"),
        skill: Some("beta".into()),
        install: true,
        expected_hash: beta["hash"].as_str().map(str::to_string),
        ..Default::default()
    };
    setup.run(request).await.unwrap();
    assert_eq!(setup.registry.get("beta").unwrap().description, "Zip two");
    let lock: serde_json::Value =
        serde_json::from_slice(&std::fs::read(setup.write_dir().join("skills-lock.json")).unwrap()).unwrap();
    let locked: Vec<&String> = lock["skills"].as_object().unwrap().keys().collect();
    assert_eq!(locked, ["beta", "pdf"], "both installs recorded, by name");
    assert_eq!(lock["skills"]["beta"]["resolvedUrl"], url("/skills.zip"));

    let raw = setup.preview(&url("/moved")).await;
    assert_eq!(raw["skills"][0]["name"], "raw", "a redirect on the same loopback server is followed");

    let away = setup.run(InstallRequest { source: url("/away"), ..Default::default() }).await.unwrap_err();
    assert_eq!(away.code(), "download_failed");
    assert!(away.to_string().contains("only https"), "{away}");
    let missing = setup.run(InstallRequest { source: url("/nothing.zip"), ..Default::default() }).await.unwrap_err();
    assert!(missing.to_string().contains("HTTP 404"), "{missing}");
}

#[tokio::test]
async fn missing_and_insecure_sources_are_refused() {
    let setup = Setup::new();
    let err = setup.run(InstallRequest { source: "./missing.tar.gz".into(), ..Default::default() }).await;
    assert_eq!(err.unwrap_err().code(), "invalid_source");
    let err = setup.run(InstallRequest { source: "http://192.0.2.1/x.zip".into(), ..Default::default() }).await;
    assert_eq!(err.unwrap_err().code(), "insecure_source");
    assert_eq!(snapshot(&setup.write_dir()).len(), 2, "only the skill that was there");
}

#[tokio::test]
async fn dest_must_be_a_discovery_folder() {
    let setup = Setup::new();
    let archive = setup.dir.path().join("s.zip");
    std::fs::write(&archive, zip(&[("SKILL.md", skill_md("s", "d").as_bytes())])).unwrap();
    let hash = setup.preview("./s.zip").await["skills"][0]["hash"].as_str().unwrap().to_string();
    let elsewhere = setup.dir.path().join("elsewhere");
    let request = |dest: &std::path::Path| InstallRequest {
        source: "./s.zip".into(),
        install: true,
        expected_hash: Some(hash.clone()),
        dest: Some(dest.to_string_lossy().into_owned()),
        ..Default::default()
    };
    assert_eq!(setup.run(request(&elsewhere)).await.unwrap_err().code(), "invalid_dest");
    assert!(!elsewhere.exists());
    let other = setup.dir.path().join("other");
    setup.run(request(&other)).await.unwrap();
    assert!(other.join("s/SKILL.md").is_file() && other.join("skills-lock.json").is_file());
    assert_eq!(setup.registry.get("s").unwrap().source, minibot_skills::SkillSource::User);
}

#[tokio::test]
async fn a_local_file_must_be_a_skill_or_an_archive() {
    let setup = Setup::new();
    std::fs::write(setup.dir.path().join("notes.txt"), skill_md("n", "d")).unwrap();
    std::fs::write(setup.dir.path().join("fake.zip"), "just text").unwrap();
    std::fs::create_dir_all(setup.dir.path().join("lone")).unwrap();
    std::fs::write(setup.dir.path().join("lone/SKILL.md"), skill_md("lone", "d")).unwrap();
    let err = setup.run(InstallRequest { source: "./notes.txt".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(err.code(), "invalid_source", "{err}");
    let err = setup.run(InstallRequest { source: "./fake.zip".into(), ..Default::default() }).await.unwrap_err();
    assert_eq!(err.code(), "archive_refused", "{err}");
    assert_eq!(setup.preview("./lone/SKILL.md").await["skills"][0]["name"], "lone");
}
