//! The daemon's one HTTP server: every channel's [`HttpMount`]s on the addresses they name, one actix-web server
//! for all of them. A request is routed only among the mounts of the address it came in on.

use crate::channel::HttpMount;
use actix_web::dev::{ServerHandle, Service};
use actix_web::middleware::DefaultHeaders;
use actix_web::{App, HttpMessage, HttpServer, guard, web};
use std::net::SocketAddr;

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
    let mut server = HttpServer::new(move || {
        let mut app = App::new().wrap(security_headers()).wrap_fn(|req, srv| {
            let listener = Listener(req.app_config().local_addr());
            req.extensions_mut().insert(listener);
            srv.call(req)
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
