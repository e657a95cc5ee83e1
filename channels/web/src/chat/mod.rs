//! The web chat: the page (`/chat?c=<n>`), its socket ([`socket`]), the actor the router sends the chat's
//! traffic to ([`hub`]) and what it queues for each socket ([`queue`]), uploads ([`uploads`]) and the HTML
//! assistant text becomes ([`markup`]).

pub mod hub;
pub mod markup;
pub mod page;
pub mod protocol;
pub mod queue;
pub mod socket;
pub mod uploads;

use actix::Addr;
use minibot_channel::messages::Intake;

pub const CHANNEL: &str = "web";
/// Chats are numbered from 1 (`web:1` is the default chat) up to this.
pub const MAX_CHAT: i64 = 1_000_000;

/// What a socket needs of the running channel; set when the channel starts.
#[derive(Clone)]
pub struct ChatLink {
    pub hub: Addr<hub::WebHub>,
    pub intake: Intake,
}

/// The chat number in a query string (`c=<n>`); 1 when absent. `None` when it is not a number in range.
pub fn chat_id_of(query: &str) -> Option<i64> {
    let value = query.split('&').find_map(|pair| pair.strip_prefix("c="));
    match value {
        None | Some("") => Some(1),
        Some(n) => n.parse::<i64>().ok().filter(|n| (1..=MAX_CHAT).contains(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_numbers_are_bounded() {
        assert_eq!(chat_id_of(""), Some(1));
        assert_eq!(chat_id_of("c=7"), Some(7));
        assert_eq!(chat_id_of("x=1&c=1000000"), Some(1_000_000));
        for bad in ["c=0", "c=-1", "c=1000001", "c=abc", "c=1e3", "c=99999999999999999999"] {
            assert_eq!(chat_id_of(bad), None, "{bad}");
        }
    }
}
