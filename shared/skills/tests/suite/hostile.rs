//! Archives built to escape or exhaust: each is refused whole, and nothing at all is written under the write
//! folder (its contents are compared byte for byte before and after), for a preview and for an install.

use super::{Route, Setup, noise, serve, skill_md, snapshot, tar_gz};
use minibot_skills::InstallRequest;
use std::collections::HashMap;
use std::io::Write;

/// Runs `source` as a preview and as an install; both must be refused with `code` and change nothing.
async fn refused(setup: &Setup, source: &str, code: &str, words: &str) {
    let before = snapshot(&setup.write_dir());
    for install in [false, true] {
        let request = InstallRequest {
            source: source.into(),
            install,
            expected_hash: install.then(|| "0".repeat(64)),
            force: true,
            ..Default::default()
        };
        let err = setup.run(request).await.expect_err("must be refused");
        assert_eq!(err.code(), code, "{err}");
        assert!(err.to_string().contains(words), "{err}");
        assert_eq!(snapshot(&setup.write_dir()), before, "something was written for {source}");
    }
    assert!(!setup.dir.path().join("evil.txt").exists());
}

fn save(setup: &Setup, name: &str, bytes: &[u8]) -> String {
    std::fs::write(setup.dir.path().join(name), bytes).unwrap();
    format!("./{name}")
}

#[tokio::test]
async fn a_zip_slip_entry_is_refused() {
    let setup = Setup::new();
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default();
    writer.start_file("s/SKILL.md", options).unwrap();
    writer.write_all(skill_md("s", "looks fine").as_bytes()).unwrap();
    writer.start_file("../evil.txt", options).unwrap();
    writer.write_all(b"gotcha").unwrap();
    let source = save(&setup, "slip.zip", &writer.finish().unwrap().into_inner());
    refused(&setup, &source, "archive_refused", "would land outside the skill folder").await;
}

#[tokio::test]
async fn an_absolute_tar_entry_is_refused() {
    let setup = Setup::new();
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    let mut header = tar::Header::new_ustar();
    // `set_path` refuses such names, so the raw header field is written, as a hostile tool would.
    header.as_ustar_mut().unwrap().name[..14].copy_from_slice(b"/tmp/evil-abs1");
    header.set_size(1);
    header.set_mode(0o644);
    header.set_cksum();
    builder.append(&header, &b"x"[..]).unwrap();
    let source = save(&setup, "abs.tar.gz", &builder.into_inner().unwrap().finish().unwrap());
    refused(&setup, &source, "archive_refused", "would land outside").await;
    assert!(!std::path::Path::new("/tmp/evil-abs1").exists());
}

#[tokio::test]
async fn a_symlink_entry_is_refused() {
    let setup = Setup::new();
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    let text = skill_md("s", "has a link");
    let mut header = tar::Header::new_gnu();
    header.set_size(text.len() as u64);
    header.set_mode(0o644);
    builder.append_data(&mut header, "s/SKILL.md", text.as_bytes()).unwrap();
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    builder.append_link(&mut link, "s/passwd", "/etc/passwd").unwrap();
    let source = save(&setup, "link.tar.gz", &builder.into_inner().unwrap().finish().unwrap());
    refused(&setup, &source, "archive_refused", "links, devices and FIFOs are not allowed").await;
}

#[tokio::test]
async fn a_symlink_in_a_local_folder_is_refused() {
    let setup = Setup::new();
    let folder = setup.dir.path().join("linked");
    super::write_skill(&folder, "", &skill_md("linked", "d"), &[]);
    std::os::unix::fs::symlink("/etc/passwd", folder.join("passwd")).unwrap();
    refused(&setup, folder.to_str().unwrap(), "archive_refused", "not a regular file").await;
}

#[tokio::test]
async fn more_than_1000_files_are_refused() {
    let setup = Setup::new();
    let text = skill_md("many", "d");
    let names: Vec<String> = (0..1000).map(|i| format!("many/f{i}.txt")).collect();
    let mut files: Vec<(&str, &[u8])> = vec![("many/SKILL.md", text.as_bytes())];
    files.extend(names.iter().map(|n| (n.as_str(), &b"x"[..])));
    assert_eq!(files.len(), 1001);
    let source = save(&setup, "many.tar.gz", &tar_gz(&files));
    refused(&setup, &source, "archive_refused", "more than 1000 files").await;
}

#[tokio::test]
async fn an_11_mib_download_is_refused() {
    let setup = Setup::new();
    let big = noise(11 * 1024 * 1024);
    let archive = tar_gz(&[("big/SKILL.md", skill_md("big", "d").as_bytes()), ("big/blob.bin", &big)]);
    assert!(archive.len() > 10 * 1024 * 1024, "noise does not compress");
    let addr = serve(HashMap::from([("/big.tar.gz".to_string(), Route::ok(archive.clone()))])).await;
    refused(&setup, &format!("http://{addr}/big.tar.gz"), "archive_refused", "larger than 10485760 bytes").await;
    let local = save(&setup, "big.tar.gz", &archive);
    refused(&setup, &local, "archive_refused", "larger than 10485760 bytes").await;
}

#[tokio::test]
async fn content_that_unpacks_past_25_mib_is_refused() {
    let setup = Setup::new();
    let zeros = vec![0u8; 26 * 1024 * 1024];
    let tar = tar_gz(&[("bomb/SKILL.md", skill_md("bomb", "d").as_bytes()), ("bomb/zeros", &zeros)]);
    assert!(tar.len() < 1024 * 1024, "zeros compress well: {} bytes", tar.len());
    let source = save(&setup, "bomb.tar.gz", &tar);
    refused(&setup, &source, "archive_refused", "expands beyond 26214400 bytes").await;
    let zipped = super::zip(&[("bomb/SKILL.md", skill_md("bomb", "d").as_bytes()), ("bomb/zeros", &zeros)]);
    let source = save(&setup, "bomb.zip", &zipped);
    refused(&setup, &source, "archive_refused", "expands beyond 26214400 bytes").await;
}
