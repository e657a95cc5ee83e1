//! Who may talk to the bot (reference 5.1): allowlists of chats and users, and `require_authorized`.

use std::collections::HashSet;

use minibot_config::TelegramSection;

/// The authorization rule of `[telegram]`, checked for every message and every button click.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    require_authorized: bool,
    chats: HashSet<i64>,
    users: HashSet<i64>,
}

impl Access {
    pub fn from_config(section: &TelegramSection) -> Self {
        Self::new(section.require_authorized, section.allowed_chat_ids.clone(), section.allowed_user_ids.clone())
    }

    pub fn new(require_authorized: bool, chats: Vec<i64>, users: Vec<i64>) -> Self {
        Self { require_authorized, chats: chats.into_iter().collect(), users: users.into_iter().collect() }
    }

    /// Empty lists mean "anyone" only when `require_authorized` is off; a non-empty list always has the last
    /// word, and a sender without a user id cannot be on a user list.
    pub fn allows(&self, chat_id: i64, user_id: Option<i64>) -> bool {
        if self.require_authorized && self.chats.is_empty() && self.users.is_empty() {
            return false;
        }
        let chat_ok = self.chats.is_empty() || self.chats.contains(&chat_id);
        let user_ok = self.users.is_empty() || user_id.is_some_and(|user| self.users.contains(&user));
        chat_ok && user_ok
    }
}

/// What a rejected sender is told; the ids let the owner add them to the config.
pub fn rejection(chat_id: i64, user_id: Option<i64>) -> String {
    let user = user_id.map_or_else(|| "None".to_owned(), |user| user.to_string());
    format!("User not recognized. Access denied. chat_id={chat_id} user_id={user}")
}

#[cfg(test)]
mod tests {
    use crate::access::*;

    #[test]
    fn required_with_no_lists_denies_everyone() {
        let access = Access::new(true, vec![], vec![]);
        assert!(!access.allows(1, Some(2)));
        assert!(!access.allows(1, None));
    }

    #[test]
    fn required_with_chat_list_only_needs_the_chat() {
        let access = Access::new(true, vec![10], vec![]);
        assert!(access.allows(10, Some(99)));
        assert!(access.allows(10, None));
        assert!(!access.allows(11, Some(99)));
    }

    #[test]
    fn required_with_user_list_only_needs_the_user() {
        let access = Access::new(true, vec![], vec![7]);
        assert!(access.allows(123, Some(7)));
        assert!(!access.allows(123, Some(8)));
        assert!(!access.allows(123, None));
    }

    #[test]
    fn required_with_both_lists_needs_both() {
        let access = Access::new(true, vec![10], vec![7]);
        assert!(access.allows(10, Some(7)));
        assert!(!access.allows(11, Some(7)));
        assert!(!access.allows(10, Some(8)));
        assert!(!access.allows(10, None));
    }

    #[test]
    fn not_required_with_no_lists_allows_everyone() {
        let access = Access::new(false, vec![], vec![]);
        assert!(access.allows(1, Some(2)));
        assert!(access.allows(-100, None));
    }

    #[test]
    fn not_required_still_honours_a_non_empty_chat_list() {
        let access = Access::new(false, vec![10], vec![]);
        assert!(access.allows(10, Some(1)));
        assert!(access.allows(10, None));
        assert!(!access.allows(11, Some(1)));
    }

    #[test]
    fn not_required_still_honours_a_non_empty_user_list() {
        let access = Access::new(false, vec![], vec![7]);
        assert!(access.allows(5, Some(7)));
        assert!(!access.allows(5, Some(8)));
        assert!(!access.allows(5, None));
    }

    #[test]
    fn not_required_with_both_lists_needs_both() {
        let access = Access::new(false, vec![10], vec![7]);
        assert!(access.allows(10, Some(7)));
        assert!(!access.allows(11, Some(7)));
        assert!(!access.allows(10, Some(8)));
        assert!(!access.allows(10, None));
    }

    #[test]
    fn from_config_reads_the_section() {
        let section = TelegramSection {
            require_authorized: true,
            allowed_chat_ids: vec![-1001],
            allowed_user_ids: vec![42],
            ..TelegramSection::default()
        };
        let access = Access::from_config(&section);
        assert_eq!(access, Access::new(true, vec![-1001], vec![42]));
        assert!(access.allows(-1001, Some(42)));
        assert!(!access.allows(-1001, Some(43)));
        assert!(!Access::from_config(&TelegramSection::default()).allows(1, Some(1)));
    }

    #[test]
    fn rejection_names_both_ids() {
        assert_eq!(rejection(-100, Some(7)), "User not recognized. Access denied. chat_id=-100 user_id=7");
        assert_eq!(rejection(5, None), "User not recognized. Access denied. chat_id=5 user_id=None");
    }
}
