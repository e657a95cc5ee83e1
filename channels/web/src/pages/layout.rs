//! The frame every page shares: head, navigation, and the logout button when there is something to log out of.

use maud::{DOCTYPE, Markup, html};

/// The pages in the navigation, as (path, label).
const NAV: &[(&str, &str)] = &[
    ("/", "Dashboard"),
    ("/chat", "Chat"),
    ("/history", "History"),
    ("/tasks", "Tasks"),
    ("/memory", "Memory"),
    ("/scheduled", "Scheduled"),
    ("/graph", "Graph"),
    ("/mcp", "MCP"),
];

pub fn page(title: &str, current: &str, signed_in: bool, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                link rel="icon" href="/static/icon.svg" type="image/svg+xml";
                title { (title) " · minibot" }
                link rel="stylesheet" href="/static/app.css";
                script src="/static/app.js" defer {}
            }
            body {
                header {
                    span.brand { "minibot" }
                    // Before the login the pages are out of reach: no links to them.
                    @if current != "/login" {
                        nav {
                            @for (path, label) in NAV {
                                a href=(path) aria-current=[(*path == current).then_some("page")] { (label) }
                            }
                        }
                    }
                    @if signed_in {
                        form.logout method="post" action="/logout" { button type="submit" { "Log out" } }
                    }
                }
                main { (body) }
            }
        }
    }
}
