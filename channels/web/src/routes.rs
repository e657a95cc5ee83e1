//! The web UI's routes on the daemon's HTTP server, every one behind [`crate::gate::check`].

use crate::auth::{SESSION_COOKIE, SESSION_LIFETIME};
use crate::gate::{self, cookie};
use crate::pages;
use crate::state::WebState;
use actix_web::http::header;
use actix_web::middleware::from_fn;
use actix_web::{HttpRequest, HttpResponse, web};
use serde::Deserialize;

pub fn configure(state: web::Data<WebState>, config: &mut web::ServiceConfig) {
    config.service(
        web::scope("")
            .app_data(state)
            .wrap(from_fn(gate::check))
            .route("/health", web::get().to(health))
            .route("/login", web::get().to(login_page))
            .route("/login", web::post().to(login))
            .route("/logout", web::post().to(logout))
            .route("/static/app.css", web::get().to(|| asset("text/css", include_str!("../assets/app.css"))))
            .route("/static/app.js", web::get().to(|| asset("text/javascript", include_str!("../assets/app.js"))))
            .route("/", web::get().to(dashboard))
            .route("/metrics", web::get().to(metrics))
            .default_service(web::to(not_found)),
    );
}

async fn health() -> HttpResponse {
    HttpResponse::Ok().content_type("application/json").body(r#"{"status":"ok"}"#)
}

async fn asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    HttpResponse::Ok().content_type(format!("{content_type}; charset=utf-8")).body(body)
}

async fn not_found() -> HttpResponse {
    HttpResponse::NotFound().content_type("text/plain; charset=utf-8").body("Not found.")
}

async fn login_page(state: web::Data<WebState>) -> HttpResponse {
    if state.credentials.is_open() {
        return see_other("/");
    }
    pages::html(pages::login::form(state.credentials.has_basic(), state.credentials.has_token(), None))
}

#[derive(Deserialize)]
struct LoginForm {
    user: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

async fn login(req: HttpRequest, form: web::Form<LoginForm>, state: web::Data<WebState>) -> HttpResponse {
    let credentials = &state.credentials;
    if credentials.is_open() {
        return see_other("/");
    }
    let client = req.peer_addr().map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip());
    if let Some(wait) = state.failures.blocked(client) {
        return pages::too_many(wait);
    }
    let by_token = form.token.as_deref().is_some_and(|token| credentials.token_matches(token));
    let by_password = match (&form.user, &form.password) {
        (Some(user), Some(password)) => credentials.basic_matches(user, password),
        _ => false,
    };
    if !(by_token || by_password) {
        state.failures.record(client);
        tracing::warn!(%client, "failed login");
        let page = pages::login::form(credentials.has_basic(), credentials.has_token(), Some("Wrong credentials."));
        return HttpResponse::Unauthorized().content_type("text/html; charset=utf-8").body(page.into_string());
    }
    let session = match state.sessions.open() {
        Ok(session) => session,
        Err(error) => {
            tracing::error!(%error, "cannot draw a session id");
            return HttpResponse::ServiceUnavailable().finish();
        }
    };
    tracing::info!(%client, "logged in");
    let secure = if state.secure_cookies { "; Secure" } else { "" };
    let cookie = format!(
        "{SESSION_COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        SESSION_LIFETIME.as_secs()
    );
    HttpResponse::SeeOther().insert_header((header::LOCATION, "/")).insert_header((header::SET_COOKIE, cookie)).finish()
}

async fn logout(req: HttpRequest, state: web::Data<WebState>) -> HttpResponse {
    if let Some(session) = cookie(&req, SESSION_COOKIE) {
        state.sessions.close(&session);
    }
    let cookie = format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/login"))
        .insert_header((header::SET_COOKIE, cookie))
        .finish()
}

async fn dashboard(state: web::Data<WebState>) -> HttpResponse {
    let overview = state.backstage.overview().await;
    pages::html(pages::dashboard::render(&overview, !state.credentials.is_open()))
}

async fn metrics(state: web::Data<WebState>) -> HttpResponse {
    match &state.metrics {
        Some(render) => HttpResponse::Ok().content_type("text/plain; version=0.0.4; charset=utf-8").body(render()),
        None => not_found().await,
    }
}

fn see_other(location: &'static str) -> HttpResponse {
    HttpResponse::SeeOther().insert_header((header::LOCATION, location)).finish()
}
