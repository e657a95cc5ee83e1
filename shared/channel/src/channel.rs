//! The lifecycle the daemon drives for every channel, in this order: [`Channel::start`] on each (checks,
//! registers with the router, names its HTTP routes), then the one HTTP server starts with every channel's
//! routes, pending turns are replayed, and [`Channel::open`] lets input in. At shutdown [`Channel::stop`] closes
//! the intake, running turns finish, and [`Channel::flush`] sends what is queued.

use crate::messages::{ChannelCapabilities, Intake};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Routes a channel serves on the daemon's HTTP server.
#[derive(Clone)]
pub struct HttpMount {
    /// The address these routes answer on. They answer only requests that came in on it, so routes meant for the
    /// public address Telegram posts to never expose the web UI there, and the other way round.
    pub listen: SocketAddr,
    /// The config key that names `listen`, for the error when it cannot be bound.
    pub key: &'static str,
    /// What these routes are, for log lines: `Telegram webhook`, `web UI`.
    pub what: &'static str,
    pub configure: Arc<dyn Fn(&mut actix_web::web::ServiceConfig) + Send + Sync>,
}

impl HttpMount {
    pub fn new(
        listen: SocketAddr,
        key: &'static str,
        what: &'static str,
        configure: impl Fn(&mut actix_web::web::ServiceConfig) + Send + Sync + 'static,
    ) -> Self {
        Self { listen, key, what, configure: Arc::new(configure) }
    }
}

/// Why a channel could not start: one line that names the setting or the peer at fault.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ChannelStartError(pub String);

/// A channel as the daemon runs it. Channels live on the actix system's thread, so this is not `Send`.
#[async_trait::async_trait(?Send)]
pub trait Channel {
    /// The channel part of its session keys (`telegram`, `web`).
    fn name(&self) -> &'static str;

    fn capabilities(&self) -> ChannelCapabilities;

    /// Checks settings and peers and registers with the router. Answers the routes to serve; no input is taken
    /// yet.
    async fn start(&mut self, intake: &Intake) -> Result<Vec<HttpMount>, ChannelStartError>;

    /// Lets input in, once the HTTP server listens and interrupted turns are back in their chats. Answers how
    /// the channel is reached, for the start-up line (`@minibot_bot (long polling)`).
    /// `server` is the running HTTP server, when any channel asked for routes.
    async fn open(&mut self, server: Option<&crate::http::RunningServer>) -> Result<String, ChannelStartError>;

    /// Stops taking input; what was taken goes on.
    async fn stop(&mut self);

    /// Waits at most `limit` until what is queued for users is sent; answers whether all of it was.
    async fn flush(&self, limit: Duration) -> bool;
}
