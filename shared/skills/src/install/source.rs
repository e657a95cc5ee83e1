//! What `install_skill`'s `source` names, and where it is fetched from.
//!
//! - a local path (`/abs`, `./rel`, `../rel`, `~/x`): a folder holding skills, a `SKILL.md`, or a
//!   `.zip` / `.tar.gz` file;
//! - `owner/repo`, `owner/repo@skill`, `owner/repo/path/to/skill`: the default branch of a GitHub repo, as the
//!   tarball codeload.github.com serves (`HEAD`);
//! - `https://github.com/owner/repo[/tree|blob/<ref>/<path>]`: the same, at that ref and path (a blob URL to
//!   a `SKILL.md` means its folder);
//! - any other `https://` URL: a `.zip`, `.tar.gz` or a raw `SKILL.md`.
//!
//! Only HTTPS is fetched. Plain `http://` is accepted for a loopback host alone (a server on this machine, which
//! is how the tests serve archives) ([`url_allowed`]). A redirect from an https source must stay on https; one
//! from a loopback http source must stay on loopback ([`redirect_allowed`]).

use super::InstallError;
use std::path::{Path, PathBuf};
use url::{Host, Url};

/// Where the files come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Local(PathBuf),
    Remote(Url),
}

/// A parsed `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// How the lock file names it: `owner/repo`, the URL, or the local path.
    pub display: String,
    /// `github`, `url` or `local`, as the npm `skills` lock file says.
    pub kind: &'static str,
    pub origin: Origin,
    /// The ref a GitHub URL named (`None`: the default branch).
    pub reference: Option<String>,
    /// The folder inside the archive to search, `/`-separated; empty for its root.
    pub subpath: String,
    /// The skill an `owner/repo@skill` source picked.
    pub skill: Option<String>,
}

impl Source {
    /// The URL or path fetched, as reported back.
    pub fn resolved(&self) -> String {
        match &self.origin {
            Origin::Local(path) => path.to_string_lossy().into_owned(),
            Origin::Remote(url) => url.to_string(),
        }
    }
}

/// Parses `raw`. A relative local path resolves against `base`.
pub fn parse_source(raw: &str, base: &Path) -> Result<Source, InstallError> {
    let text = raw.trim();
    if text.is_empty() {
        return Err(InstallError::InvalidSource("source is empty".into()));
    }
    if let Some(path) = local_path(text, base) {
        return Ok(Source {
            display: path.to_string_lossy().into_owned(),
            kind: "local",
            origin: Origin::Local(path),
            reference: None,
            subpath: String::new(),
            skill: None,
        });
    }
    if !text.contains("://") {
        return shorthand(text);
    }
    let url = Url::parse(text).map_err(|e| InstallError::InvalidSource(format!("`{text}` is not a URL: {e}")))?;
    if !url_allowed(&url) {
        return Err(insecure(&url));
    }
    let parts: Vec<&str> = url.path_segments().map(|s| s.filter(|p| !p.is_empty()).collect()).unwrap_or_default();
    let on_github = matches!(url.host_str(), Some("github.com" | "www.github.com"));
    if on_github && parts.len() >= 2 {
        let repo = parts[1].strip_suffix(".git").unwrap_or(parts[1]);
        let (reference, path) = if parts.len() >= 4 && matches!(parts[2], "tree" | "blob") {
            let rest = &parts[4..];
            let rest = match rest.split_last() {
                Some((last, folder)) if *last == "SKILL.md" => folder,
                _ => rest,
            };
            (Some(parts[3].to_string()), rest.join("/"))
        } else {
            (None, String::new())
        };
        return github(parts[0], repo, reference, path, None);
    }
    Ok(Source {
        display: url.to_string(),
        kind: "url",
        origin: Origin::Remote(url),
        reference: None,
        subpath: String::new(),
        skill: None,
    })
}

/// A path when `text` is written as one: absolute, `./`, `../`, `~/`.
fn local_path(text: &str, base: &Path) -> Option<PathBuf> {
    if let Some(rest) = text.strip_prefix("~/") {
        return std::env::var_os("HOME").map(|home| PathBuf::from(home).join(rest));
    }
    let relative = text == "." || text == ".." || text.starts_with("./") || text.starts_with("../");
    if text.starts_with('/') {
        Some(PathBuf::from(text))
    } else if relative {
        Some(base.join(text))
    } else {
        None
    }
}

/// `owner/repo[/path][@skill]`.
fn shorthand(text: &str) -> Result<Source, InstallError> {
    let (base, skill) = match text.split_once('@') {
        Some((base, skill)) => (base, Some(skill.trim()).filter(|s| !s.is_empty()).map(str::to_string)),
        None => (text, None),
    };
    let parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    if parts.len() < 2 {
        return Err(InstallError::InvalidSource(format!(
            "`{text}` is neither owner/repo[/path][@skill], an https URL nor a local path (/…, ./…, ~/…)"
        )));
    }
    github(parts[0], parts[1], None, parts[2..].join("/"), skill)
}

fn github(
    owner: &str,
    repo: &str,
    reference: Option<String>,
    subpath: String,
    skill: Option<String>,
) -> Result<Source, InstallError> {
    let segment_ok = |s: &str| {
        !s.is_empty()
            && !s.chars().all(|c| c == '.')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    };
    if !segment_ok(owner) || !segment_ok(repo) {
        return Err(InstallError::InvalidSource(
            "GitHub owner and repo may only contain letters, digits, '.', '_' and '-'".into(),
        ));
    }
    if let Some(reference) = &reference
        && !segment_ok(reference)
    {
        return Err(InstallError::InvalidSource(format!("`{reference}` is not a ref this tool can fetch")));
    }
    if subpath.split('/').any(|part| part == "..") {
        return Err(InstallError::InvalidSource("the path inside the repo may not contain `..`".into()));
    }
    let at = reference.as_deref().unwrap_or("HEAD");
    let raw = format!("https://codeload.github.com/{owner}/{repo}/tar.gz/{at}");
    let url = Url::parse(&raw).map_err(|e| InstallError::InvalidSource(format!("{raw}: {e}")))?;
    Ok(Source {
        display: format!("{owner}/{repo}"),
        kind: "github",
        origin: Origin::Remote(url),
        reference,
        subpath,
        skill,
    })
}

/// HTTPS anywhere; plain HTTP only to a loopback host.
pub fn url_allowed(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => is_loopback(url),
        _ => false,
    }
}

/// Whether a download that started at `origin` may follow a redirect to `next`. The rule is on the origin, not
/// on the previous hop: an https source never goes through plain http, even to loopback (a loopback service
/// the source points at is not what the user asked to trust), and plain http from a loopback source stays on
/// loopback.
pub fn redirect_allowed(origin: &Url, next: &Url) -> bool {
    match origin.scheme() {
        "https" => next.scheme() == "https",
        "http" => is_loopback(origin) && is_loopback(next) && matches!(next.scheme(), "http" | "https"),
        _ => false,
    }
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

pub(crate) fn insecure_redirect(origin: &Url, next: &Url) -> InstallError {
    InstallError::Insecure(format!(
        "refusing the redirect from {origin} to {next}: only https redirects are followed from an https source, \
         and a plain http source on a loopback host may redirect within loopback only"
    ))
}

pub(crate) fn insecure(url: &Url) -> InstallError {
    InstallError::Insecure(format!(
        "refusing {url}: only https sources are supported (plain http only to a loopback host such as 127.0.0.1, \
         for a server on this machine)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Source {
        parse_source(raw, Path::new("/base")).unwrap()
    }

    fn url(source: &Source) -> String {
        source.resolved()
    }

    #[test]
    fn github_shorthands_fetch_the_default_branch() {
        let plain = parse("anthropics/skills");
        assert_eq!((plain.kind, plain.display.as_str()), ("github", "anthropics/skills"));
        assert_eq!(url(&plain), "https://codeload.github.com/anthropics/skills/tar.gz/HEAD");
        assert_eq!((plain.subpath.as_str(), plain.skill.as_deref()), ("", None));

        let picked = parse("anthropics/skills@pdf");
        assert_eq!(picked.skill.as_deref(), Some("pdf"));
        assert_eq!(url(&picked), "https://codeload.github.com/anthropics/skills/tar.gz/HEAD");

        let nested = parse("anthropics/skills/document-skills/pdf");
        assert_eq!(nested.subpath, "document-skills/pdf");
        assert_eq!(nested.reference, None);
    }

    #[test]
    fn github_urls_keep_their_ref_and_path() {
        let tree = parse("https://github.com/o/r/tree/main/skills/pdf");
        assert_eq!(url(&tree), "https://codeload.github.com/o/r/tar.gz/main");
        assert_eq!((tree.reference.as_deref(), tree.subpath.as_str()), (Some("main"), "skills/pdf"));

        let blob = parse("https://github.com/o/r/blob/v1.2/skills/pdf/SKILL.md");
        assert_eq!((blob.reference.as_deref(), blob.subpath.as_str()), (Some("v1.2"), "skills/pdf"));

        let repo = parse("https://github.com/o/r.git");
        assert_eq!(url(&repo), "https://codeload.github.com/o/r/tar.gz/HEAD");
        assert_eq!(repo.display, "o/r");
    }

    #[test]
    fn other_urls_and_local_paths() {
        let archive = parse("https://example.com/skills.tar.gz");
        assert_eq!((archive.kind, url(&archive).as_str()), ("url", "https://example.com/skills.tar.gz"));
        assert_eq!(parse("http://127.0.0.1:8080/s.zip").kind, "url");
        assert_eq!(parse("http://localhost/s.zip").kind, "url");
        assert_eq!(parse("http://[::1]:9/s.zip").kind, "url");
        assert_eq!(parse("/tmp/skill").origin, Origin::Local(PathBuf::from("/tmp/skill")));
        assert_eq!(parse("./x.zip").origin, Origin::Local(PathBuf::from("/base/./x.zip")));
    }

    #[test]
    fn redirects_keep_to_the_origins_rule() {
        let u = |s: &str| Url::parse(s).unwrap();
        let allowed = |from: &str, to: &str| redirect_allowed(&u(from), &u(to));
        assert!(allowed("https://a.example/x", "https://b.example/y"));
        assert!(allowed("https://a.example/x", "https://127.0.0.1/y"));
        assert!(!allowed("https://a.example/x", "http://b.example/y"));
        assert!(!allowed("https://a.example/x", "http://127.0.0.1:8080/y"), "https never steps down to http");
        assert!(!allowed("https://a.example/x", "http://localhost/y"));
        assert!(!allowed("https://a.example/x", "ftp://a.example/y"));
        assert!(allowed("http://127.0.0.1:1/x", "http://127.0.0.1:2/y"));
        assert!(allowed("http://localhost/x", "http://[::1]:9/y"));
        assert!(allowed("http://127.0.0.1/x", "https://localhost/y"));
        assert!(!allowed("http://127.0.0.1/x", "https://example.com/y"), "loopback http stays on loopback");
        assert!(!allowed("http://127.0.0.1/x", "http://example.com/y"));
        assert!(!allowed("http://example.com/x", "http://127.0.0.1/y"));
    }

    #[test]
    fn refusals() {
        let err = parse_source("http://example.com/s.zip", Path::new("/")).unwrap_err();
        assert_eq!(err.code(), "insecure_source");
        assert!(err.to_string().contains("only https") && err.to_string().contains("loopback"), "{err}");
        assert_eq!(parse_source("http://github.com/o/r", Path::new("/")).unwrap_err().code(), "insecure_source");
        assert_eq!(parse_source("ftp://x/y", Path::new("/")).unwrap_err().code(), "insecure_source");
        for bad in ["justone", "o/../r", "o/r/../../x", "own er/repo", "", "https://github.com/o/r/tree/a;b/x"] {
            assert_eq!(parse_source(bad, Path::new("/")).unwrap_err().code(), "invalid_source", "{bad}");
        }
    }
}
