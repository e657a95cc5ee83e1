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
            .route("/static/icon.svg", web::get().to(|| asset("image/svg+xml", include_str!("../assets/icon.svg"))))
            .route("/favicon.ico", web::get().to(|| async { HttpResponse::NoContent().finish() }))
            .route("/", web::get().to(dashboard))
            .route("/chat", web::get().to(chat_page))
            .route("/chat/ws", web::get().to(crate::chat::socket::open))
            .route("/chat/upload", web::post().to(upload))
            .route("/tasks", web::get().to(tasks_page))
            .route("/tasks/cancel", web::post().to(cancel_task))
            .route("/metrics", web::get().to(metrics))
            .configure(pages::browse::configure)
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

/// The login form's fields.
#[derive(Default)]
struct LoginForm {
    user: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

/// A login form is a few hundred bytes; anyone may send one, so its body is read only this far and this long.
const LOGIN_BODY_LIMIT: usize = 4096;
const LOGIN_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// An upload may take a while on a slow link, but not forever: a trickle would hold the connection.
const UPLOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Reads the form body within [`LOGIN_BODY_LIMIT`] and [`LOGIN_BODY_TIMEOUT`]; `None` when it is not one.
async fn read_login_form(payload: web::Payload) -> Option<LoginForm> {
    let body =
        tokio::time::timeout(LOGIN_BODY_TIMEOUT, payload.to_bytes_limited(LOGIN_BODY_LIMIT)).await.ok()?.ok()?.ok()?;
    let mut form = LoginForm::default();
    for (key, value) in url::form_urlencoded::parse(&body) {
        let slot = match key.as_ref() {
            "user" => &mut form.user,
            "password" => &mut form.password,
            "token" => &mut form.token,
            _ => continue,
        };
        *slot = Some(value.into_owned());
    }
    Some(form)
}

async fn login(req: HttpRequest, payload: web::Payload, state: web::Data<WebState>) -> HttpResponse {
    let credentials = &state.credentials;
    if credentials.is_open() {
        return see_other("/");
    }
    let client = req.peer_addr().map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip());
    // Before the body is read: a blocked client costs nothing. The attempt counts as failed from here on (and
    // is taken back if it succeeds), so attempts sent side by side cannot all pass the check before any counts.
    if let Some(wait) = state.failures.blocked(client) {
        return pages::too_many(wait);
    }
    state.failures.record(client);
    let Some(form) = read_login_form(payload).await else {
        return HttpResponse::BadRequest().content_type("text/plain; charset=utf-8").body("Not a login form.");
    };
    let by_token = form.token.as_deref().is_some_and(|token| credentials.token_matches(token));
    let by_password = match (&form.user, &form.password) {
        (Some(user), Some(password)) => credentials.basic_matches(user, password),
        _ => false,
    };
    if !(by_token || by_password) {
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
    state.failures.forgive(client);
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

async fn chat_page(req: HttpRequest, state: web::Data<WebState>) -> HttpResponse {
    let Some(chat_id) = crate::chat::chat_id_of(req.query_string()) else {
        return HttpResponse::BadRequest().body("c must be a chat number from 1 to 1000000");
    };
    let signed_in = !state.credentials.is_open();
    let uploads = &state.uploads;
    pages::html(crate::chat::page::render(chat_id, &state.chat_token, signed_in, uploads.limits(), uploads.enabled()))
}

#[derive(Deserialize)]
struct TasksQuery {
    status: Option<String>,
    fragment: Option<u8>,
    notice: Option<String>,
}

async fn tasks_page(query: web::Query<TasksQuery>, state: web::Data<WebState>) -> HttpResponse {
    let all = match query.status.as_deref() {
        None | Some("running") => false,
        Some("all") => true,
        Some(_) => return HttpResponse::BadRequest().body("status must be running or all"),
    };
    let tasks = state.backstage.tasks(pages::tasks::LIMIT).await;
    if query.fragment == Some(1) {
        return pages::html(pages::tasks::table(&tasks, all));
    }
    // The notice is one of ours (see cancel_task), chosen by a word, never text from the URL.
    let notice = match query.notice.as_deref() {
        Some("cancelled") => Some("The task was cancelled."),
        Some("not_cancelled") => Some("The task could not be cancelled; see its status."),
        _ => None,
    };
    pages::html(pages::tasks::render(&tasks, all, !state.credentials.is_open(), notice))
}

#[derive(Deserialize)]
struct CancelForm {
    task_id: String,
}

async fn cancel_task(form: web::Form<CancelForm>, state: web::Data<WebState>) -> HttpResponse {
    let outcome = state.backstage.cancel_task(form.task_id.trim()).await;
    let cancelled = outcome.as_ref().is_ok_and(|v| v["cancelled"].as_bool() == Some(true));
    if let Err(error) = &outcome {
        tracing::warn!(%error, "cancel from the web UI failed");
    }
    let location = if cancelled { "/tasks?notice=cancelled" } else { "/tasks?notice=not_cancelled" };
    HttpResponse::SeeOther().insert_header((header::LOCATION, location)).finish()
}

/// One attachment's raw bytes (see [`crate::chat::uploads`]).
async fn upload(req: HttpRequest, payload: web::Payload, state: web::Data<WebState>) -> HttpResponse {
    let Some(chat_id) = crate::chat::chat_id_of(req.query_string()) else {
        return json_error(actix_web::http::StatusCode::BAD_REQUEST, "c must be a chat number from 1 to 1000000");
    };
    let largest = state.uploads.limits().largest();
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > largest) {
        let message = format!("The file is over the {largest}-byte upload limit.");
        return json_error(actix_web::http::StatusCode::PAYLOAD_TOO_LARGE, &message);
    }
    let Some(_arriving) = state.uploads.begin() else {
        let message = "Other uploads are still arriving; try again when they are in.";
        return json_error(actix_web::http::StatusCode::TOO_MANY_REQUESTS, message);
    };
    let limit = usize::try_from(largest).unwrap_or(usize::MAX);
    let Ok(read) = tokio::time::timeout(UPLOAD_TIMEOUT, payload.to_bytes_limited(limit)).await else {
        return json_error(actix_web::http::StatusCode::REQUEST_TIMEOUT, "The upload took too long.");
    };
    let bytes = match read {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => return json_error(actix_web::http::StatusCode::BAD_REQUEST, "The upload was cut short."),
        Err(_) => {
            let message = format!("The file is over the {largest}-byte upload limit.");
            return json_error(actix_web::http::StatusCode::PAYLOAD_TOO_LARGE, &message);
        }
    };
    let header_text = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let name = header_text("x-file-name").map(|n| percent_decode(&n));
    let mime = header_text("content-type");
    let saver = state.clone().into_inner();
    let accepted = web::block(move || saver.uploads.accept(chat_id, name.as_deref(), mime.as_deref(), &bytes)).await;
    match accepted {
        Ok(Ok(accepted)) => HttpResponse::Ok().json(accepted),
        Ok(Err(error)) => json_error(error.status(), &error.to_string()),
        Err(_) => json_error(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR, "The file could not be saved."),
    }
}

fn json_error(status: actix_web::http::StatusCode, message: &str) -> HttpResponse {
    HttpResponse::build(status).json(serde_json::json!({ "error": message }))
}

/// `%XX` sequences decoded; invalid ones and invalid UTF-8 kept as they are (the name is sanitised later).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) =
                (bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
