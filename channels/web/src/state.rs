//! What every web request shares.

use crate::auth::{Credentials, Failures, Sessions};
use crate::backstage::Backstage;
use crate::chat::ChatLink;
use crate::chat::uploads::Uploads;
use std::sync::{Arc, OnceLock};

/// Renders the metrics in Prometheus text format.
pub type MetricsRender = Arc<dyn Fn() -> String + Send + Sync>;

pub struct WebState {
    pub credentials: Credentials,
    pub sessions: Sessions,
    pub failures: Failures,
    /// Session cookies carry `Secure` (sent only over HTTPS) unless the server is on a loopback address.
    pub secure_cookies: bool,
    pub backstage: Arc<dyn Backstage>,
    pub metrics: Option<MetricsRender>,
    /// What the browsing pages read: history, memory, graph, scheduled prompts.
    pub readers: crate::readers::Readers,
    /// This boot's chat token: a chat socket must offer it ([`crate::chat::socket`]). Random per start, so a
    /// page from an earlier start (or another server) cannot open one.
    pub chat_token: String,
    /// Set once the channel has started and registered with the router.
    pub chat: OnceLock<ChatLink>,
    pub uploads: Uploads,
    /// Chat sockets open, by client.
    pub chat_sockets: minibot_channel::http::PerClient,
}
