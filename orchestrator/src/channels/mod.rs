//! Channel actors: they turn user input into [`crate::messages::Inbound`], register a
//! [`crate::messages::ChannelHandle`] that says where replies go and what the channel can do, and render what
//! the conversation sends. They know the router only as an [`crate::messages::Intake`].

pub mod console;

pub use minibot_channel::{approval_wait, shown};
pub use minibot_telegram as telegram;
