//! What every web request shares.

use crate::auth::{Credentials, Failures, Sessions};
use crate::backstage::Backstage;
use std::sync::Arc;

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
}
