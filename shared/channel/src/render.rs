//! Fits an answer to the channel that shows it: HTML reduced to its text where the channel shows plain text,
//! and text longer than the channel's limit split at line breaks. The channel declares both
//! ([`ChannelCapabilities`]); nothing here assumes a particular channel.

use crate::messages::{ChannelCapabilities, Outbound};
use minibot_agent::ReplyKind;

/// The messages to send for `message` on a channel with `capabilities`, in order. Only the last part carries
/// the ids of the messages it answers, so a channel sees an answer as complete once all of it arrived.
pub fn fit(mut message: Outbound, capabilities: &ChannelCapabilities) -> Vec<Outbound> {
    if capabilities.needs_plain_text(message.kind) {
        message.text = html_to_text(&message.text);
        message.kind = ReplyKind::Text;
    }
    let Some(limit) = capabilities.max_message_chars.filter(|limit| *limit > 0) else {
        return vec![message];
    };
    let parts = split(&message.text, limit);
    if parts.len() <= 1 {
        return vec![message];
    }
    let last = parts.len() - 1;
    parts
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            let mut part = message.clone();
            part.text = text;
            if i != last {
                part.answers.clear();
                part.task_handoff.clear();
            }
            part
        })
        .collect()
}

/// Splits `text` into parts of at most `limit` characters, at the last line break (else space) before the
/// limit, and hard at the limit when a line has neither.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.chars().count() > limit {
        let cut = rest.char_indices().nth(limit).map_or(rest.len(), |(at, _)| at);
        let head = &rest[..cut];
        let at = head.rfind('\n').or_else(|| head.rfind(' ')).filter(|at| *at > 0).unwrap_or(cut);
        parts.push(rest[..at].trim_end().to_string());
        rest = rest[at..].trim_start_matches(['\n', ' ']);
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest.to_string());
    }
    parts
}

/// The text of an HTML answer, for a channel that cannot render it.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{OutboundRole, TextFormat};

    #[test]
    fn long_text_splits_at_line_breaks_and_only_the_last_part_answers() {
        let text = format!("{}\n{}\n{}", "a".repeat(6), "b".repeat(6), "c".repeat(6));
        let mut message = Outbound::text("x", 1, text, OutboundRole::Answer);
        message.answers = vec!["m1".into()];
        let caps = ChannelCapabilities { max_message_chars: Some(14), ..Default::default() };
        let parts = fit(message, &caps);
        let texts: Vec<&str> = parts.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(texts, ["aaaaaa\nbbbbbb", "cccccc"]);
        assert!(parts[0].answers.is_empty());
        assert_eq!(parts[1].answers, ["m1"]);
    }

    #[test]
    fn a_line_without_breaks_is_cut_at_the_limit() {
        assert_eq!(split(&"é".repeat(5), 2), ["éé", "éé", "é"]);
        assert_eq!(split("", 3), [""]);
    }

    #[test]
    fn html_becomes_text_only_where_the_channel_shows_plain_text() {
        let mut message = Outbound::text("x", 1, "<b>hi</b> &amp; bye", OutboundRole::Answer);
        message.kind = ReplyKind::Html;
        let plain = fit(message.clone(), &ChannelCapabilities::default());
        assert_eq!(plain[0].text, "hi & bye");
        assert_eq!(plain[0].kind, ReplyKind::Text);
        let html = fit(message, &ChannelCapabilities { format: TextFormat::Html, ..Default::default() });
        assert_eq!(html[0].text, "<b>hi</b> &amp; bye");
    }
}
