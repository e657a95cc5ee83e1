//! The web channel: the `[http]` server's pages (dashboard so far), its login and the guards in front of every
//! route ([`gate`]), and `/metrics`. The orchestrator hands it a [`Backstage`] to read figures from and a
//! metrics renderer; it never sees the runtime. Everything is served on the daemon's one HTTP server as an
//! [`HttpMount`].

pub mod auth;
pub mod backstage;
pub mod chat;
pub mod gate;
pub mod pages;
pub mod readers;
mod routes;
pub mod state;

pub use backstage::{Backstage, McpServerRow, Overview, TaskFigures, WorkerRow};
pub use state::MetricsRender;

use actix_web::web;
use minibot_channel::messages::{ChannelCapabilities, ChannelHandle, Intake, RegisterChannel, TextFormat};
use minibot_channel::{Channel, ChannelStartError, HttpMount};
use minibot_config::Config;
use state::WebState;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

pub use chat::CHANNEL;

pub const CAPABILITIES: ChannelCapabilities = ChannelCapabilities {
    approvals: true,
    files: false,
    edit_messages: false,
    max_message_chars: None,
    format: TextFormat::Html,
};

/// 256 random bits, URL-safe base64: a token that is also a valid WebSocket subprotocol name.
fn random_token() -> Result<String, getrandom::Error> {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

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
        history: Option<minibot_store::Store>,
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
            readers: readers::Readers::new(Arc::new(config.clone()), history),
            chat_token: random_token().map_err(|e| ChannelStartError(format!("cannot draw the chat token: {e}")))?,
            chat: Default::default(),
            uploads: chat::uploads::Uploads::from_config(config),
            chat_sockets: Default::default(),
        };
        Ok(Self { listen, state: web::Data::new(state) })
    }
}

/// Whether the web UI answers `path`: another route on its address (Telegram's webhook) must not take one of
/// these.
pub fn serves_path(path: &str) -> bool {
    const PATHS: &[&str] = &[
        "/",
        "/health",
        "/login",
        "/logout",
        "/favicon.ico",
        "/metrics",
        "/chat",
        "/chat/ws",
        "/chat/upload",
        "/tasks",
        "/tasks/cancel",
        "/history",
        "/memory",
        "/scheduled",
        "/graph",
        "/mcp",
    ];
    PATHS.contains(&path) || path.starts_with("/static/")
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

    /// It asks for approvals with buttons and shows answers as HTML; files are named in text, not delivered.
    fn capabilities(&self) -> ChannelCapabilities {
        CAPABILITIES
    }

    async fn start(&mut self, intake: &Intake) -> Result<Vec<HttpMount>, ChannelStartError> {
        let hub = actix::Supervisor::start(|_| chat::hub::WebHub::default());
        intake.register.do_send(RegisterChannel {
            name: CHANNEL.into(),
            handle: ChannelHandle {
                outbound: hub.clone().recipient(),
                progress: hub.clone().recipient(),
                capabilities: CAPABILITIES,
                files: None,
                approvals: Some(hub.clone().recipient()),
                // A finished answer is in the history the page loads, whether or not a socket was open.
                confirms_delivery: false,
            },
        });
        let _ = self.state.chat.set(chat::ChatLink { hub, intake: intake.clone() });
        // Old uploads go at start and then every ten minutes, off the async threads.
        let state = self.state.clone();
        actix::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(600));
            loop {
                every.tick().await;
                let state = state.clone();
                let _ = tokio::task::spawn_blocking(move || state.uploads.clean()).await;
            }
        });
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
        if address.ip().is_unspecified() {
            // `http://0.0.0.0:…` opens nowhere: say what does.
            let local = std::net::SocketAddr::new(std::net::IpAddr::from([127, 0, 0, 1]), address.port());
            return Ok(format!("web UI on every address, port {} (http://{local}/ from this machine)", address.port()));
        }
        Ok(format!("web UI at http://{address}/"))
    }

    /// Open chat sockets close (the server's stop would otherwise wait for them); the pages' database handles
    /// close too.
    async fn stop(&mut self) {
        if let Some(link) = self.state.chat.get() {
            let _ = link.hub.send(chat::hub::CloseAll).await;
        }
        self.state.readers.close().await;
    }

    async fn flush(&self, _limit: Duration) -> bool {
        true
    }
}
