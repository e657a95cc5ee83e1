//! The daemon's one HTTP server: every channel's [`HttpMount`]s on the addresses they name, one actix-web server
//! for all of them. A request is routed only among the mounts of the address it came in on.

use crate::channel::HttpMount;
use actix_web::dev::{ServerHandle, Service, ServiceResponse};
use actix_web::http::header;
use actix_web::middleware::DefaultHeaders;
use actix_web::{App, HttpMessage, HttpResponse, HttpServer, guard, web};
use futures_util::FutureExt;
use futures_util::future::Either;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Seconds a stop waits for requests in flight before dropping them.
const SHUTDOWN_SECONDS: u64 = 5;

#[derive(Debug, thiserror::Error)]
#[error("{key}: cannot listen on {listen} ({what}): {detail}")]
pub struct ServeError {
    pub key: &'static str,
    pub listen: SocketAddr,
    pub what: &'static str,
    pub detail: String,
}

/// The running server.
pub struct RunningServer {
    handle: ServerHandle,
    /// Each mount's configured address and the address it got (they differ when the config says port 0).
    bound: Vec<(SocketAddr, SocketAddr)>,
}

impl RunningServer {
    /// Where the mount configured for `listen` is served.
    pub fn local_addr(&self, listen: SocketAddr) -> Option<SocketAddr> {
        self.bound.iter().find(|(asked, _)| *asked == listen).map(|(_, got)| *got)
    }

    /// Stops taking requests; those in flight finish first (for at most a few seconds).
    pub async fn stop(&self) {
        self.handle.stop(true).await;
    }
}

/// The address a request came in on, set before routing so that each mount's guard can read it.
#[derive(Clone, Copy)]
struct Listener(SocketAddr);

/// Connections one client address may hold at once. Each costs a file descriptor for as long as it stays open,
/// and a client that trickles its requests holds many: past this, its requests are refused, so one address
/// cannot take the server's descriptors from everyone else (a personal UI, even behind a proxy that is one
/// address, needs far fewer).
const MAX_CONNECTIONS_PER_ADDRESS: usize = 128;
/// Connections in all, at most; lower when the process may open few files.
const MAX_CONNECTIONS: usize = 10_000;

/// The client a limit counts `address` against: one machine may hold many addresses, so every loopback address
/// is one client, and an IPv6 address counts by its /64 (the block one site is given); an IPv4 address mapped
/// into IPv6 counts as itself.
pub fn client_key(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V4(v4) if v4.is_loopback() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V4(_) => address,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => client_key(IpAddr::V4(v4)),
            None if v6.is_loopback() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// What each client ([`client_key`]) holds open: connections here, chat sockets in the web channel.
#[derive(Clone, Default)]
pub struct PerClient(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// One thing a client holds, counted in its [`PerClient`] until dropped.
pub struct Held {
    counts: PerClient,
    client: IpAddr,
    /// What the client holds with this one.
    pub count: usize,
}

impl PerClient {
    pub fn hold(&self, address: IpAddr) -> Held {
        let client = client_key(address);
        let mut counts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(client).or_default();
        *count += 1;
        Held { counts: self.clone(), client, count: *count }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut counts = self.counts.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.client);
            }
        }
    }
}

/// A connection's place among its client's, given back when the connection ends (its data is dropped then).
struct ConnectionSlot {
    _held: Held,
    over_limit: bool,
    /// Requests that came in on this connection.
    requests: AtomicUsize,
    /// A duplicate of the connection's descriptor, to end it from a request (see [`shut`]).
    socket: Option<Arc<OwnedFd>>,
}

impl ConnectionSlot {
    fn take(connections: &PerClient, address: IpAddr, socket: Option<Arc<OwnedFd>>) -> Self {
        let held = connections.hold(address);
        let over_limit = held.count > MAX_CONNECTIONS_PER_ADDRESS;
        Self { _held: held, over_limit, requests: AtomicUsize::new(0), socket }
    }
}

/// Ends a connection: the server's next read sees the end of the stream and its next write fails, so it drops
/// the connection and whatever it had buffered for it. Through a duplicate of its descriptor: the shutdown acts
/// on the socket both share.
fn shut(socket: &OwnedFd) {
    if let Ok(fd) = socket.try_clone() {
        let _ = std::net::TcpStream::from(fd).shutdown(std::net::Shutdown::Both);
    }
}

/// Ends the connection a request came in on, for a handler that keeps its connection (a WebSocket) and finds
/// the client no longer reading: what the server had buffered for it is dropped with it.
#[derive(Clone)]
pub struct ConnectionCloser(Arc<OwnedFd>);

impl ConnectionCloser {
    pub fn of(req: &actix_web::HttpRequest) -> Option<Self> {
        req.conn_data::<ConnectionSlot>()?.socket.clone().map(Self)
    }

    pub fn close(&self) {
        shut(&self.0);
    }
}

/// A third of the files this process may open, within [`MAX_CONNECTIONS`]: each connection holds two (its
/// socket and the duplicate [`ConnectionSlot`] keeps); the rest are for databases, logs, tools.
fn connection_limit() -> usize {
    let soft =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 3).unwrap_or(MAX_CONNECTIONS).clamp(64, MAX_CONNECTIONS)
}

/// Set on every response the server gives, unless a route set its own: no script, style, frame or form target
/// from anywhere but this server, no framing, no MIME sniffing, no referrer, nothing cached.
fn security_headers() -> DefaultHeaders {
    DefaultHeaders::new()
        .add((
            "Content-Security-Policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
             media-src 'self' blob:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
             base-uri 'none'",
        ))
        .add(("X-Content-Type-Options", "nosniff"))
        .add(("X-Frame-Options", "DENY"))
        // Not `no-referrer`: under it a browser sends `Origin: null` with the UI's own form posts, which the
        // cross-site check must refuse.
        .add(("Referrer-Policy", "same-origin"))
        .add(("Cross-Origin-Opener-Policy", "same-origin"))
        .add(("Cross-Origin-Resource-Policy", "same-origin"))
        .add(("Cache-Control", "no-store"))
}

/// Serves `mounts`; must be called inside a running actix system, which drives the server. On one address,
/// mounts are tried in the order given: put the ones with catch-all routes last.
pub fn serve(mounts: Vec<HttpMount>) -> Result<RunningServer, ServeError> {
    let mut addresses: Vec<(SocketAddr, &'static str, &'static str)> = Vec::new();
    for mount in &mounts {
        if !addresses.iter().any(|(listen, _, _)| *listen == mount.listen) {
            addresses.push((mount.listen, mount.key, mount.what));
        }
    }
    // Port 0 asks for any free port: the guard then needs the port the socket got, known only after binding.
    let mut listeners = Vec::new();
    for (listen, key, what) in &addresses {
        let socket = std::net::TcpListener::bind(listen).map_err(|e| ServeError {
            key,
            listen: *listen,
            what,
            detail: e.to_string(),
        })?;
        let got = socket.local_addr().map_err(|e| ServeError { key, listen: *listen, what, detail: e.to_string() })?;
        listeners.push((*listen, got, socket));
    }
    let bound: Vec<(SocketAddr, SocketAddr)> = listeners.iter().map(|(asked, got, _)| (*asked, *got)).collect();
    let routes: Vec<(SocketAddr, Vec<HttpMount>)> = bound
        .iter()
        .map(|(asked, got)| (*got, mounts.iter().filter(|m| m.listen == *asked).cloned().collect()))
        .collect();
    let connections = PerClient::default();
    let mut server = HttpServer::new(move || {
        let mut app = App::new().wrap(security_headers()).wrap_fn(|req, srv| {
            if let Some(slot) = req.conn_data::<ConnectionSlot>() {
                let refusal = if slot.over_limit {
                    Some("Too many connections from your address.")
                } else if slot.requests.fetch_add(1, Ordering::Relaxed) > 0 {
                    // Keep-alive is off, yet the server still answers requests a client pipelined behind the
                    // first: one that never reads them would have it queue every answer in memory. The second
                    // request ends the connection.
                    if let Some(socket) = &slot.socket {
                        shut(socket);
                    }
                    Some("One request per connection.")
                } else {
                    None
                };
                if let Some(refusal) = refusal {
                    let refusal =
                        HttpResponse::ServiceUnavailable().insert_header((header::CONNECTION, "close")).body(refusal);
                    return Either::Left(std::future::ready(Ok(req.into_response(refusal).map_into_right_body())));
                }
            }
            let listener = Listener(req.app_config().local_addr());
            req.extensions_mut().insert(listener);
            Either::Right(srv.call(req).map(|res| res.map(ServiceResponse::map_into_left_body)))
        });
        for (address, mounts) in &routes {
            let address = *address;
            let mut scope = web::scope("")
                .guard(guard::fn_guard(move |ctx| ctx.req_data().get::<Listener>().is_some_and(|l| l.0 == address)));
            for mount in mounts {
                let configure = mount.configure.clone();
                scope = scope.configure(move |config| configure(config));
            }
            app = app.service(scope);
        }
        app
    })
    .on_connect(move |connection, data| {
        use std::os::fd::AsFd;
        let Some(stream) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() else { return };
        let Ok(peer) = stream.peer_addr() else { return };
        let socket = stream.as_fd().try_clone_to_owned().ok().map(Arc::new);
        let slot = ConnectionSlot::take(&connections, peer.ip(), socket);
        if slot.over_limit {
            // At once, before it can sit on a descriptor waiting for a request that never comes.
            if let Some(socket) = &slot.socket {
                shut(socket);
            }
        }
        data.insert(slot);
    })
    .max_connections(connection_limit())
    // A request's head must arrive within this; a body is bounded by each route that reads one.
    .client_request_timeout(std::time::Duration::from_secs(5))
    // One request per connection (sockets aside): a client that pipelines requests and never reads the answers
    // would otherwise have the server queue every answer in memory.
    .keep_alive(actix_web::http::KeepAlive::Disabled)
    .workers(1)
    .disable_signals()
    .shutdown_timeout(SHUTDOWN_SECONDS);
    for ((listen, _, socket), (_, key, what)) in listeners.into_iter().zip(&addresses) {
        server = server.listen(socket).map_err(|e| ServeError { key, listen, what, detail: e.to_string() })?;
    }
    let server = server.run();
    let handle = server.handle();
    actix::spawn(async move {
        if let Err(e) = server.await {
            tracing::error!(error = %e, "the HTTP server stopped with an error");
        }
    });
    for mount in &mounts {
        let address = bound.iter().find(|(asked, _)| *asked == mount.listen).map_or(mount.listen, |(_, got)| *got);
        tracing::info!(%address, routes = mount.what, "HTTP routes served");
    }
    Ok(RunningServer { handle, bound })
}

#[cfg(test)]
mod tests {
    use super::client_key;
    use std::net::IpAddr;

    fn key(address: &str) -> IpAddr {
        client_key(address.parse().unwrap())
    }

    #[test]
    fn one_machine_or_site_is_one_client() {
        assert_eq!(key("127.0.0.2"), key("127.0.0.1"), "every loopback address is this machine");
        assert_eq!(key("::1"), key("127.0.0.1"));
        assert_eq!(key("::ffff:192.0.2.7"), key("192.0.2.7"), "a mapped IPv4 address is itself");
        assert_ne!(key("192.0.2.7"), key("192.0.2.8"));
        assert_eq!(key("2001:db8::1"), key("2001:db8::ffff:1:2"), "an IPv6 /64 is one site");
        assert_ne!(key("2001:db8::1"), key("2001:db8:0:1::1"));
    }
}
