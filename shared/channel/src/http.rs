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
use std::net::{IpAddr, SocketAddr};
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

/// Open connections by client address.
#[derive(Clone, Default)]
struct Connections(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// A connection's place in [`Connections`], given back when the connection ends (its data is dropped then).
struct ConnectionSlot {
    connections: Connections,
    address: IpAddr,
    over_limit: bool,
}

impl Connections {
    fn take(&self, address: IpAddr) -> ConnectionSlot {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let count = open.entry(address).or_default();
        *count += 1;
        ConnectionSlot { connections: self.clone(), address, over_limit: *count > MAX_CONNECTIONS_PER_ADDRESS }
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.connections.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

/// Ends a connection over its address's limit at once, before it can sit on a descriptor waiting for a request
/// that never comes: the server then reads the end of the stream and drops it. (Through a duplicate of its
/// descriptor: the shutdown acts on the socket both share.)
fn shut(stream: &actix_web::rt::net::TcpStream) {
    use std::os::fd::AsFd;
    if let Ok(fd) = stream.as_fd().try_clone_to_owned() {
        let _ = std::net::TcpStream::from(fd).shutdown(std::net::Shutdown::Both);
    }
}

/// Half the files this process may open, within [`MAX_CONNECTIONS`]: the rest are for databases, logs, tools.
fn connection_limit() -> usize {
    let soft =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 2).unwrap_or(MAX_CONNECTIONS).clamp(64, MAX_CONNECTIONS)
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
    let connections = Connections::default();
    let mut server = HttpServer::new(move || {
        let mut app = App::new().wrap(security_headers()).wrap_fn(|req, srv| {
            if req.conn_data::<ConnectionSlot>().is_some_and(|slot| slot.over_limit) {
                let refusal = HttpResponse::ServiceUnavailable()
                    .insert_header((header::CONNECTION, "close"))
                    .body("Too many connections from your address.");
                return Either::Left(std::future::ready(Ok(req.into_response(refusal).map_into_right_body())));
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
        let Some(stream) = connection.downcast_ref::<actix_web::rt::net::TcpStream>() else { return };
        let Ok(peer) = stream.peer_addr() else { return };
        let slot = connections.take(peer.ip());
        if slot.over_limit {
            shut(stream);
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
