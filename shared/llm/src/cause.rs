//! Why a request got no HTTP answer, in words a user can act on. reqwest wraps the cause several layers deep
//! (reqwest → hyper-util → io::Error → rustls); the layer that says what happened is found by type where it has
//! one (refused, TLS) and by hyper-util's own wording where it has none (DNS). The provider and `minibot doctor`'s
//! probes both read failures through [`classify`].

use std::error::Error;

/// What a failed connection comes down to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// Nothing listens at the address.
    Refused,
    /// The peer closed the connection (often an HTTPS port called over HTTP).
    Reset,
    /// The operating system gave up connecting.
    TimedOut,
    /// The TLS handshake failed; rustls's words.
    Tls(String),
    /// The host name does not resolve; the resolver's words.
    Dns(String),
    /// Anything else: the innermost error's words.
    Other(String),
}

/// Reads the chain under `error`.
pub fn classify(error: &(dyn Error + 'static)) -> Cause {
    let chain: Vec<&(dyn Error + 'static)> = std::iter::successors(Some(error), |e| inner(*e)).collect();
    for layer in &chain {
        if let Some(tls) = layer.downcast_ref::<rustls::Error>() {
            return Cause::Tls(tls.to_string());
        }
        if let Some(io) = layer.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return Cause::Refused,
                std::io::ErrorKind::ConnectionReset => return Cause::Reset,
                std::io::ErrorKind::TimedOut => return Cause::TimedOut,
                _ => {}
            }
        }
    }
    let innermost = chain.last().map(|e| e.to_string()).unwrap_or_default();
    if chain.iter().any(|layer| layer.to_string().starts_with("dns error")) {
        return Cause::Dns(innermost);
    }
    Cause::Other(innermost)
}

/// The cause of a failed connection to `host` (`name:port`), one line.
pub(crate) fn describe(error: &(dyn Error + 'static), host: &str) -> String {
    match classify(error) {
        Cause::Tls(tls) => format!("the TLS handshake with {host} failed: {tls}"),
        Cause::Refused => format!("connection refused: nothing is listening at {host}; is the server running?"),
        Cause::Reset => format!("{host} closed the connection (is it an HTTPS port called over HTTP?)"),
        Cause::TimedOut => format!("connecting to {host} timed out"),
        Cause::Dns(detail) => {
            let name = host.rsplit_once(':').map_or(host, |(name, _)| name);
            format!("cannot resolve the host name `{name}`: {detail}")
        }
        Cause::Other(detail) => detail,
    }
}

/// The next layer down. An io::Error's `source()` skips the error it wraps (it answers that error's source), and
/// the TLS stack nests a rustls error two io::Errors deep, so an io::Error is opened by hand.
fn inner<'a>(layer: &'a (dyn Error + 'static)) -> Option<&'a (dyn Error + 'static)> {
    match layer.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
        Some(wrapped) => Some(wrapped as &(dyn Error + 'static)),
        None => layer.source(),
    }
}
