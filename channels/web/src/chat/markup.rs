//! Assistant text as HTML for the page: markdown rendered on the server, then cleaned by ammonia, which keeps
//! only harmless tags and attributes (no script, no event handler, no `javascript:` link, no style).

use minibot_agent::ReplyKind;
use pulldown_cmark::{Options, Parser, html};

pub fn to_html(text: &str, kind: ReplyKind) -> String {
    let raw = match kind {
        ReplyKind::Html => text.to_string(),
        ReplyKind::Markdown | ReplyKind::Text => {
            let mut out = String::with_capacity(text.len() * 5 / 4);
            let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
            html::push_html(&mut out, Parser::new_ext(text, options));
            out
        }
    };
    ammonia::Builder::default().link_rel(Some("noopener noreferrer nofollow")).clean(&raw).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_rendered_and_scripts_are_not() {
        let html = to_html("**bold** and `code`\n\n- a\n- b", ReplyKind::Markdown);
        assert!(
            html.contains("<strong>bold</strong>") && html.contains("<code>code</code>") && html.contains("<li>a</li>")
        );
        for hostile in [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "[x](javascript:alert(1))",
            "<a href=\"javascript:alert(1)\">x</a>",
            "<iframe src=\"https://evil.example\"></iframe>",
            "<div style=\"background:url(https://evil.example)\">x</div>",
        ] {
            for kind in [ReplyKind::Markdown, ReplyKind::Html] {
                let html = to_html(hostile, kind).to_ascii_lowercase();
                assert!(
                    !html.contains("<script")
                        && !html.contains("onerror=")
                        && !html.contains("href=\"javascript:")
                        && !html.contains("<iframe")
                        && !html.contains("style="),
                    "{hostile} → {html}"
                );
            }
        }
    }
}
