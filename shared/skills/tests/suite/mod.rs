mod discovery;
mod hardening;
mod hostile;
mod install;

use flate2::Compression;
use flate2::write::GzEncoder;
use minibot_skills::{InstallRequest, Installer, Outcome, Root, SkillRegistry, SkillSettings, SkillSource};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A `SKILL.md` with this name and description and a one-line body.
pub fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nDo the {name} thing.\n")
}

/// Writes `<root>/<dir>/SKILL.md` (and any extra files).
pub fn write_skill(root: &Path, dir: &str, text: &str, extra: &[(&str, &str)]) {
    let folder = root.join(dir);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("SKILL.md"), text).unwrap();
    for (name, content) in extra {
        let path = folder.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

/// A `.tar.gz` of these files.
pub fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
    for (path, content) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, path, *content).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

/// A `.zip` of these files (deflated).
pub fn zip(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (path, content) in files {
        writer.start_file(*path, options).unwrap();
        writer.write_all(content).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// Every entry under `dir` (folders too, hidden ones too): relative path → content (`None` for a folder).
pub fn snapshot(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(base).unwrap().to_string_lossy().into_owned();
            if entry.file_type().unwrap().is_dir() {
                out.insert(rel, None);
                walk(base, &path, out);
            } else {
                out.insert(rel, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// A write folder holding one skill already, and an installer over it.
pub struct Setup {
    pub dir: tempfile::TempDir,
    pub registry: Arc<SkillRegistry>,
    pub installer: Installer,
}

impl Setup {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let write = dir.path().join("skills");
        write_skill(&write, "keep", &skill_md("keep", "Already here"), &[]);
        let other = dir.path().join("other");
        let settings = SkillSettings::with_roots(write, vec![Root { path: other, source: SkillSource::User }]);
        let registry = Arc::new(SkillRegistry::new(settings));
        let installer = Installer::new(Arc::clone(&registry)).unwrap();
        Self { dir, registry, installer }
    }

    pub fn write_dir(&self) -> PathBuf {
        self.dir.path().join("skills")
    }

    pub async fn run(&self, request: InstallRequest) -> Result<Outcome, minibot_skills::InstallError> {
        self.installer.run(request, self.dir.path()).await
    }

    pub async fn preview(&self, source: &str) -> serde_json::Value {
        let outcome = self.run(InstallRequest { source: source.into(), ..Default::default() }).await;
        let outcome = outcome.unwrap_or_else(|e| panic!("preview of {source} failed: {e} ({})", e.code()));
        minibot_skills::install::to_json(&outcome)
    }

    pub async fn install(&self, source: &str, hash: &str) -> Result<serde_json::Value, minibot_skills::InstallError> {
        let request = InstallRequest {
            source: source.into(),
            install: true,
            expected_hash: Some(hash.into()),
            ..Default::default()
        };
        self.run(request).await.map(|outcome| minibot_skills::install::to_json(&outcome))
    }
}

/// A response the test server gives for one path.
#[derive(Clone)]
pub struct Route {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Route {
    pub fn ok(body: Vec<u8>) -> Self {
        Self { status: 200, headers: Vec::new(), body }
    }

    pub fn redirect(to: &str) -> Self {
        Self { status: 302, headers: vec![("Location".into(), to.into())], body: Vec::new() }
    }
}

/// An HTTP/1.1 server on 127.0.0.1 answering each path from `routes` (404 otherwise), one request per
/// connection.
pub async fn serve(routes: HashMap<String, Route>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let routes = Arc::new(routes);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let routes = Arc::clone(&routes);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                let route = routes.get(&path).cloned().unwrap_or(Route { status: 404, headers: vec![], body: vec![] });
                let mut response = format!(
                    "HTTP/1.1 {} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    route.status,
                    route.body.len()
                );
                for (name, value) in &route.headers {
                    response.push_str(&format!("{name}: {value}\r\n"));
                }
                response.push_str("\r\n");
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.write_all(&route.body).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    addr
}

/// Bytes that do not compress (xorshift), for archives that must really be large.
pub fn noise(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}
