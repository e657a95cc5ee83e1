//! One supervised actor per MCP server. Calls already reconnect on demand; the actor also watches its server
//! between calls, so a server that crashed or was down at start-up is reconnected in the background (with
//! growing pauses while it stays down), and a server whose tools could not be loaded gets them as soon as it
//! answers, without waiting for `reload_mcp`.

use actix::prelude::*;
use minibot_mcp::{McpHub, McpServer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CHECK_EVERY: Duration = Duration::from_secs(5);
const MAX_PAUSE: Duration = Duration::from_secs(60);

fn down_backoff() -> backon::ExponentialBackoff {
    use backon::BackoffBuilder as _;
    backon::ExponentialBuilder::default()
        .with_min_delay(CHECK_EVERY * 2)
        .with_max_delay(MAX_PAUSE)
        .without_max_times()
        .build()
}

/// Which servers of one hub are up, as their connection actors last saw them: `minibot_mcp_servers_up` counts
/// them. Up is connected with its tools loaded (its last load had no error).
#[derive(Default)]
struct UpServers(Mutex<HashMap<String, bool>>);

impl UpServers {
    fn set(&self, server: &str, up: bool) {
        if let Ok(mut servers) = self.0.lock() {
            servers.insert(server.to_string(), up);
            metrics::gauge!("minibot_mcp_servers_up").set(servers.values().filter(|up| **up).count() as f64);
        }
    }
}

pub struct McpConnection {
    hub: Arc<McpHub>,
    server: Arc<McpServer>,
    up: Arc<UpServers>,
    connected: bool,
    checking: bool,
    /// Checks to skip while the server stays down (backoff).
    skip: u32,
    /// The pauses between checks of a server that is down: 10 s doubling to 60 s, started over when it is back.
    backoff: backon::ExponentialBackoff,
}

impl McpConnection {
    fn new(hub: Arc<McpHub>, server: Arc<McpServer>, up: Arc<UpServers>) -> Self {
        Self { hub, server, up, connected: true, checking: false, skip: 0, backoff: down_backoff() }
    }

    /// Reports this server to the gauge; a reload (`reload_mcp`, a reconnect) shows by the next check.
    fn report(&self) {
        let name = self.server.name();
        let loaded = self.hub.status().iter().any(|s| s.name == name && s.error.is_none());
        self.up.set(name, self.connected && loaded);
    }

    fn check(&mut self, ctx: &mut Context<Self>) {
        self.report();
        if self.checking {
            return;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return;
        }
        self.checking = true;
        let server = self.server.clone();
        let probe = async move {
            if server.is_connected().await {
                return Ok(true);
            }
            server.connect().await.map(|()| false)
        };
        ctx.spawn(probe.into_actor(self).map(|result, act, _ctx| {
            act.checking = false;
            let name = act.server.name().to_string();
            match result {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(server = %name, "mcp server reconnected");
                    act.backoff = down_backoff();
                    let missing_tools =
                        act.hub.status().iter().any(|s| s.name == name && (s.tools.is_empty() || s.error.is_some()));
                    if missing_tools {
                        let hub = act.hub.clone();
                        actix::spawn(async move {
                            hub.reload().await;
                        });
                    }
                    act.connected = true;
                }
                Err(error) => {
                    if act.connected {
                        tracing::warn!(server = %name, error = %error, "mcp server is down; reconnecting in the background");
                    }
                    act.connected = false;
                    act.report();
                    let pause = act.backoff.next().unwrap_or(MAX_PAUSE);
                    act.skip = (pause.as_secs() / CHECK_EVERY.as_secs()).saturating_sub(1) as u32;
                }
            }
        }));
    }
}

impl Actor for McpConnection {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.report();
        ctx.run_interval(CHECK_EVERY, |act, ctx| act.check(ctx));
    }
}

impl Supervised for McpConnection {
    fn restarting(&mut self, _ctx: &mut Context<Self>) {
        tracing::warn!(server = %self.server.name(), "mcp connection actor restarted");
        self.checking = false;
    }
}

/// Starts one supervised connection actor per configured server.
pub fn supervise(hub: &Arc<McpHub>) -> Vec<Addr<McpConnection>> {
    let up = Arc::new(UpServers::default());
    hub.servers()
        .iter()
        .map(|server| {
            let (hub, server, up) = (hub.clone(), server.clone(), up.clone());
            Supervisor::start(move |_| McpConnection::new(hub, server, up))
        })
        .collect()
}
