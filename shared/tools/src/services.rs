use minibot_config::Config;
use minibot_store::Store;
use std::sync::Arc;

/// What tools may use: the configuration and the stores. Cheap to clone.
#[derive(Clone)]
pub struct ToolServices {
    pub config: Arc<Config>,
    /// The transcript store; `None` in processes without conversations (workers).
    pub store: Option<Store>,
}
