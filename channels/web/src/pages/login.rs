//! The login page. It asks for what `[http]` configures: user and password, a token, or either. A wrong answer
//! says only that it was wrong.

use super::layout::page;
use maud::{Markup, html};

pub fn form(basic: bool, token: bool, error: Option<&str>) -> Markup {
    page(
        "Log in",
        "/login",
        false,
        html! {
            h1 { "Log in" }
            @if let Some(error) = error { p.error role="alert" { (error) } }
            form.login method="post" action="/login" {
                @if basic {
                    label { "User" input type="text" name="user" autocomplete="username" required; }
                    label { "Password" input type="password" name="password" autocomplete="current-password" required; }
                }
                @if token && !basic {
                    label { "Access token" input type="password" name="token" autocomplete="current-password" required; }
                }
                button type="submit" { "Log in" }
            }
            @if token && basic {
                details {
                    summary { "Log in with the access token instead" }
                    form.login method="post" action="/login" {
                        label { "Access token" input type="password" name="token" autocomplete="off" required; }
                        button type="submit" { "Log in" }
                    }
                }
            }
        },
    )
}
