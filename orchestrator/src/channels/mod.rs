//! Channel actors: they turn user input into [`crate::messages::Inbound`] and render replies.

pub mod console;
