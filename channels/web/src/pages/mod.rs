//! Pages, rendered on the server with maud (which escapes everything it interpolates).

pub mod browse;
pub mod dashboard;
pub mod graph;
pub mod history;
pub mod layout;
pub mod login;
pub mod mcp;
pub mod memory;
pub mod scheduled;
pub mod tasks;

use actix_web::HttpResponse;
use actix_web::http::header;
use std::time::Duration;

pub fn html(markup: maud::Markup) -> HttpResponse {
    HttpResponse::Ok().content_type("text/html; charset=utf-8").body(markup.into_string())
}

/// Past the login failure limits.
pub fn too_many(wait: Duration) -> HttpResponse {
    let seconds = wait.as_secs().max(1);
    HttpResponse::TooManyRequests()
        .insert_header((header::RETRY_AFTER, seconds.to_string()))
        .content_type("text/plain; charset=utf-8")
        .body(format!("Too many failed logins. Try again in {} minutes.", seconds.div_ceil(60)))
}
