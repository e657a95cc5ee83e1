//! What the channel a turn runs on can do. Channels declare it when they register; the conversation and the
//! tools read it instead of assuming, so a tool never reports an effect (a file sent, an approval asked) that
//! the channel cannot carry out.

/// How a channel renders message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TextFormat {
    /// Text as it is; markup is shown literally, so HTML answers are reduced to their text first.
    #[default]
    Plain,
    /// Telegram's MarkdownV2.
    MarkdownV2,
    Html,
}

impl TextFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::MarkdownV2 => "markdown_v2",
            Self::Html => "html",
        }
    }
}

/// The capabilities of one channel. The default is the least a channel can do: plain text of any length and
/// nothing else, which is also what a task worker (no channel at all) gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChannelCapabilities {
    /// It can ask the user to approve a tool call and return the answer.
    pub approvals: bool,
    /// It can deliver a file (`send_file`, artifacts) to the chat.
    pub files: bool,
    /// It can edit a message it sent (live progress, drafts) instead of sending a new one.
    pub edit_messages: bool,
    /// Longest message it accepts, in characters; longer replies are split. `None`: no limit.
    pub max_message_chars: Option<usize>,
    pub format: TextFormat,
}

impl ChannelCapabilities {
    /// Whether a reply of `kind` must be reduced to its text before this channel shows it.
    pub fn needs_plain_text(&self, kind: crate::ReplyKind) -> bool {
        kind == crate::ReplyKind::Html && self.format == TextFormat::Plain
    }
}
