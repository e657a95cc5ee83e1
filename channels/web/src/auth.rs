//! Who may use the web UI and `/metrics`: the `[http]` credentials (a Bearer token, Basic user and password, or
//! both), compared in constant time, and the sessions the login page opens. Failed attempts are counted per
//! client address and in all; past the limits every attempt is refused for a while, right or wrong, so that
//! guessing is slow. Nothing here logs or returns a secret.

use minibot_channel::http::client_key;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The cookie the login page sets.
pub const SESSION_COOKIE: &str = "minibot_session";
/// How long a login lasts.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at once; logging in past this ends the oldest.
const MAX_SESSIONS: usize = 256;

/// Failed attempts one address may make within [`FAILURE_WINDOW`] before it is refused until the window ends.
pub const MAX_FAILURES_PER_ADDRESS: u32 = 5;
/// Failed attempts all addresses together may make within [`FAILURE_WINDOW`] (a guesser with many addresses).
pub const MAX_FAILURES_IN_ALL: u32 = 50;
pub const FAILURE_WINDOW: Duration = Duration::from_secs(15 * 60);

/// `[http]` credentials as digests: a compare then takes the same time whatever the lengths.
#[derive(Clone)]
pub struct Credentials {
    token: Option<[u8; 32]>,
    /// The token is long enough that guessing it is hopeless (see [`STRONG_TOKEN_CHARS`]).
    strong_token: bool,
    basic: Option<([u8; 32], [u8; 32])>,
}

/// A token this long cannot be guessed, so it is still taken while guessing elsewhere has closed the door to
/// everyone else: scripts and Prometheus keep working through someone else's flood of wrong passwords.
pub const STRONG_TOKEN_CHARS: usize = 24;

fn digest(value: &[u8]) -> [u8; 32] {
    Sha256::digest(value).into()
}

fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.ct_eq(b).into()
}

impl Credentials {
    pub fn from_config(http: &minibot_config::HttpSection) -> Self {
        let token = (!http.auth_token.is_empty()).then(|| digest(http.auth_token.as_bytes()));
        let basic = (!http.basic_auth_user.is_empty() && !http.basic_auth_password.is_empty())
            .then(|| (digest(http.basic_auth_user.as_bytes()), digest(http.basic_auth_password.as_bytes())));
        Self { token, strong_token: http.auth_token.chars().count() >= STRONG_TOKEN_CHARS, basic }
    }

    /// A `Bearer` header with the right token, when that token is strong.
    pub fn strong_bearer_matches(&self, header: &str) -> bool {
        let (scheme, value) = header.trim().split_once(' ').unwrap_or((header, ""));
        self.strong_token && scheme.eq_ignore_ascii_case("bearer") && self.token_matches(value.trim())
    }

    /// No credentials: the server is on a loopback address, and anyone who can reach it may use it.
    pub fn is_open(&self) -> bool {
        self.token.is_none() && self.basic.is_none()
    }

    pub fn has_basic(&self) -> bool {
        self.basic.is_some()
    }

    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    pub fn token_matches(&self, given: &str) -> bool {
        self.token.as_ref().is_some_and(|expected| same(expected, &digest(given.as_bytes())))
    }

    pub fn basic_matches(&self, user: &str, password: &str) -> bool {
        self.basic.as_ref().is_some_and(|(u, p)| {
            // Both compared, always: which of the two was wrong takes the same time to learn as neither.
            let user_ok = same(u, &digest(user.as_bytes()));
            let password_ok = same(p, &digest(password.as_bytes()));
            user_ok & password_ok
        })
    }

    /// An `Authorization` header value: `Bearer <token>` or `Basic <base64(user:password)>`.
    pub fn header_matches(&self, header: &str) -> bool {
        let (scheme, value) = header.trim().split_once(' ').unwrap_or((header, ""));
        let value = value.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return self.token_matches(value);
        }
        if scheme.eq_ignore_ascii_case("basic") {
            use base64::Engine;
            let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(value) else {
                return false;
            };
            let Ok(decoded) = String::from_utf8(decoded) else {
                return false;
            };
            let (user, password) = decoded.split_once(':').unwrap_or((&decoded, ""));
            return self.basic_matches(user, password);
        }
        false
    }
}

/// Open login sessions, by the digest of their cookie (the cookie itself is kept nowhere).
#[derive(Default)]
pub struct Sessions {
    open: Mutex<HashMap<[u8; 32], Instant>>,
}

impl Sessions {
    /// Opens a session; answers the cookie value (256 random bits, URL-safe base64).
    pub fn open(&self) -> Result<String, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        use base64::Engine;
        let id = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        open.retain(|_, expires| *expires > now);
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = open.iter().min_by_key(|(_, expires)| **expires).map(|(k, _)| *k)
        {
            open.remove(&oldest);
        }
        open.insert(digest(id.as_bytes()), now + SESSION_LIFETIME);
        Ok(id)
    }

    pub fn is_valid(&self, cookie: &str) -> bool {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&digest(cookie.as_bytes())).is_some_and(|expires| *expires > Instant::now())
    }

    pub fn close(&self, cookie: &str) {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&digest(cookie.as_bytes()));
    }
}

/// Failed attempts, per client and in all, over a sliding [`FAILURE_WINDOW`]. A client is an address as
/// [`client_key`] counts it: an IPv6 /64 is one client, so a site cannot take a fresh address per guess.
#[derive(Default)]
pub struct Failures {
    state: Mutex<FailureState>,
}

#[derive(Default)]
struct FailureState {
    by_address: HashMap<IpAddr, Vec<Instant>>,
    all: Vec<Instant>,
}

impl Failures {
    /// How long `address` must wait before its next attempt counts; `None` when it may try now.
    pub fn blocked(&self, address: IpAddr) -> Option<Duration> {
        self.blocked_address(address).or_else(|| self.blocked_everyone())
    }

    /// How long `address` itself is blocked, for its own failures.
    pub fn blocked_address(&self, address: IpAddr) -> Option<Duration> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        state.prune(now);
        state.by_address.get(&client_key(address)).and_then(|times| wait(times, MAX_FAILURES_PER_ADDRESS, now))
    }

    /// How long everyone is blocked, for the failures of all addresses together.
    pub fn blocked_everyone(&self) -> Option<Duration> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        state.prune(now);
        wait(&state.all, MAX_FAILURES_IN_ALL, now)
    }

    /// Takes back the latest failure recorded for `address` (an attempt counted before it was checked, which
    /// then succeeded).
    pub fn forgive(&self, address: IpAddr) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(times) = state.by_address.get_mut(&client_key(address)) {
            times.pop();
        }
        state.all.pop();
        state.prune(Instant::now());
    }

    pub fn record(&self, address: IpAddr) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        state.prune(now);
        state.by_address.entry(client_key(address)).or_default().push(now);
        state.all.push(now);
    }
}

/// Past `limit` failures, the time until the oldest leaves the window.
fn wait(times: &[Instant], limit: u32, now: Instant) -> Option<Duration> {
    (times.len() >= limit as usize).then(|| times.first().map_or(FAILURE_WINDOW, |t| FAILURE_WINDOW - (now - *t)))
}

impl FailureState {
    fn prune(&mut self, now: Instant) {
        let fresh = |t: &Instant| now.duration_since(*t) < FAILURE_WINDOW;
        self.all.retain(fresh);
        self.by_address.retain(|_, times| {
            times.retain(fresh);
            !times.is_empty()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(token: &str, user: &str, password: &str) -> minibot_config::HttpSection {
        minibot_config::HttpSection {
            auth_token: token.into(),
            basic_auth_user: user.into(),
            basic_auth_password: password.into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_configured_credentials_match() {
        let both = Credentials::from_config(&section("t0ken", "ann", "pw"));
        assert!(both.header_matches("Bearer t0ken"));
        assert!(both.header_matches("bearer  t0ken "));
        assert!(!both.header_matches("Bearer t0ke"));
        assert!(!both.header_matches("Bearer t0ken2"));
        assert!(!both.header_matches("t0ken"));
        // ann:pw
        assert!(both.header_matches("Basic YW5uOnB3"));
        // ann:px, bob:pw, ann (no colon), not base64
        assert!(!both.header_matches("Basic YW5uOnB4"));
        assert!(!both.header_matches("Basic Ym9iOnB3"));
        assert!(!both.header_matches("Basic YW5u"));
        assert!(!both.header_matches("Basic !!!"));
        let token_only = Credentials::from_config(&section("t0ken", "", ""));
        assert!(!token_only.basic_matches("", ""));
        let open = Credentials::from_config(&section("", "ann", ""));
        assert!(open.is_open(), "a user without a password is not a credential");
        assert!(!open.header_matches("Bearer "));
    }

    #[test]
    fn sessions_are_random_and_closable() {
        let sessions = Sessions::default();
        let a = sessions.open().unwrap();
        let b = sessions.open().unwrap();
        assert_ne!(a, b);
        assert!(a.len() >= 43);
        assert!(sessions.is_valid(&a) && sessions.is_valid(&b));
        sessions.close(&a);
        assert!(!sessions.is_valid(&a) && sessions.is_valid(&b));
        assert!(!sessions.is_valid("guess"));
    }

    #[test]
    fn repeated_failures_block_the_address_then_everyone() {
        let failures = Failures::default();
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..MAX_FAILURES_PER_ADDRESS {
            assert!(failures.blocked(one).is_none());
            failures.record(one);
        }
        let wait = failures.blocked(one).unwrap();
        assert!(wait <= FAILURE_WINDOW && wait > FAILURE_WINDOW - Duration::from_secs(60));
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(failures.blocked(other).is_none());
        let block: IpAddr = "2001:db8::1".parse().unwrap();
        for n in 0..5u16 {
            failures.record(IpAddr::from([0x2001, 0xdb8, 0, 0, n, 0, 0, 7]));
        }
        assert!(failures.blocked(block).is_some(), "an IPv6 /64 counts as one client");
        assert!(failures.blocked("2001:db8:0:1::1".parse().unwrap()).is_none(), "the next /64 is another client");
        for n in 0..MAX_FAILURES_IN_ALL {
            failures.record(IpAddr::from([198, 51, 100, (n % 250) as u8]));
        }
        assert!(failures.blocked(other).is_some(), "past the global limit every address waits");
    }
}
