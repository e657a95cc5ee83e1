//! What a server sends, filtered before rmcp's service loop sees it (stdio and HTTP alike).
//!
//! - Notifications are logged at debug level and dropped. This client uses none of them (no progress tokens,
//!   subscriptions or log levels are requested; reload is explicit), and rmcp would log each one it receives at
//!   info level with its whole payload, so a chatty or hostile server would fill the log.
//! - The `instructions` of the initialize result are capped ([`cap_instructions`]) here, once, so the session's
//!   peer info, rmcp's "initialized" log line, the system prompt and the status page all hold the capped text.

use crate::untrusted::{MAX_INSTRUCTIONS_BYTES, cap_instructions};
use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::sync::Arc;

pub struct Inbound<T> {
    inner: T,
    server: Arc<str>,
}

impl<T> Inbound<T> {
    pub fn new(inner: T, server: &str) -> Self {
        Self { inner, server: server.into() }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Inbound<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.inner.receive().await? {
                JsonRpcMessage::Notification(notification) => {
                    if tracing::enabled!(tracing::Level::DEBUG) {
                        let method = serde_json::to_value(&notification)
                            .ok()
                            .and_then(|v| v.get("method").and_then(|m| m.as_str()).map(minibot_agent::excerpt));
                        tracing::debug!(server = %self.server, method = ?method, "mcp notification ignored");
                    }
                }
                JsonRpcMessage::Response(mut response) => {
                    if let ServerResult::InitializeResult(result) = &mut response.result
                        && let Some(instructions) = result.instructions.as_mut()
                    {
                        if instructions.len() > MAX_INSTRUCTIONS_BYTES {
                            tracing::warn!(
                                server = %self.server,
                                bytes = instructions.len(),
                                "mcp server instructions cut to {MAX_INSTRUCTIONS_BYTES} bytes"
                            );
                        }
                        *instructions = cap_instructions(instructions);
                    }
                    return Some(JsonRpcMessage::Response(response));
                }
                other => return Some(other),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
