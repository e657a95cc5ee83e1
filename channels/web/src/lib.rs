//! The web channel: the `[http]` server's pages (dashboard so far), its login and the guards in front of every
//! route ([`gate`]), and `/metrics`. The orchestrator hands it a [`Backstage`] to read figures from and a
//! metrics renderer; it never sees the runtime. Everything is served on the daemon's one HTTP server as an
//! [`HttpMount`].

pub mod auth;
pub mod backstage;
pub mod gate;
pub mod pages;
mod routes;
pub mod state;

pub use backstage::{Backstage, McpServerRow, Overview, TaskFigures, WorkerRow};
pub use state::MetricsRender;

use actix_web::web;
use minibot_channel::messages::{ChannelCapabilities, Intake};
use minibot_channel::{Channel, ChannelStartError, HttpMount};
use minibot_config::Config;
use state::WebState;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

pub const CHANNEL: &str = "web";

/// The web UI as the daemon runs it.
pub struct WebChannel {
    listen: SocketAddr,
    state: web::Data<WebState>,
}

impl WebChannel {
    /// Checks `[http]`: the address must be an IP address (a name could resolve anywhere), and with no
    /// credentials a loopback one. Answers the address to listen on.
    pub fn check(config: &Config) -> Result<SocketAddr, ChannelStartError> {
        let http = &config.http;
        let listen = listen_address(&http.host, http.port)?;
        if auth::Credentials::from_config(http).is_open() && !listen.ip().is_loopback() {
            return Err(ChannelStartError(format!(
                "http.host: `{}` is reachable from other machines and [http] sets no credentials; set \
                 http.auth_token (or basic_auth_user and basic_auth_password), or listen on 127.0.0.1",
                http.host
            )));
        }
        Ok(listen)
    }

    pub fn new(
        config: &Config,
        backstage: Arc<dyn Backstage>,
        metrics: Option<MetricsRender>,
    ) -> Result<Self, ChannelStartError> {
        let listen = Self::check(config)?;
        let credentials = auth::Credentials::from_config(&config.http);
        let state = WebState {
            credentials,
            sessions: Default::default(),
            failures: Default::default(),
            secure_cookies: !listen.ip().is_loopback(),
            backstage,
            metrics,
        };
        Ok(Self { listen, state: web::Data::new(state) })
    }
}

/// `host` as an IP address with `port`; `localhost` is taken as 127.0.0.1, any other name is refused.
pub fn listen_address(host: &str, port: u16) -> Result<SocketAddr, ChannelStartError> {
    let host = host.trim();
    let ip = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::from([127, 0, 0, 1])
    } else {
        host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().map_err(|_| {
            ChannelStartError(format!(
                "http.host: `{host}` is not an IP address; use 127.0.0.1 (this machine only) or the address of \
                 the interface to listen on"
            ))
        })?
    };
    Ok(SocketAddr::new(ip, port))
}

#[async_trait::async_trait(?Send)]
impl Channel for WebChannel {
    fn name(&self) -> &'static str {
        CHANNEL
    }

    fn capabilities(&self) -> ChannelCapabilities {
        ChannelCapabilities::default()
    }

    async fn start(&mut self, _intake: &Intake) -> Result<Vec<HttpMount>, ChannelStartError> {
        let state = self.state.clone();
        Ok(vec![HttpMount::new(self.listen, "http.port", "web UI", move |config| {
            routes::configure(state.clone(), config)
        })])
    }

    async fn open(
        &mut self,
        server: Option<&minibot_channel::http::RunningServer>,
    ) -> Result<String, ChannelStartError> {
        let address = server.and_then(|s| s.local_addr(self.listen)).unwrap_or(self.listen);
        Ok(format!("web UI at http://{address}/"))
    }

    async fn stop(&mut self) {}

    async fn flush(&self, _limit: Duration) -> bool {
        true
    }
}
