//! What the Telegram channel is called and what it can do, as the router and the turns see it.

use minibot_channel::messages::ChannelCapabilities;

pub const CHANNEL: &str = "telegram";

/// Telegram can ask with buttons, take files and edit messages. Answers are split by [`super::markdown`] after
/// rendering, not by the router, because MarkdownV2 escaping changes the length.
pub const CAPABILITIES: ChannelCapabilities = ChannelCapabilities {
    approvals: true,
    files: true,
    edit_messages: true,
    max_message_chars: None,
    format: minibot_agent::TextFormat::MarkdownV2,
};
