//! One browser's chat socket (`GET /chat/ws?c=<n>`, session `web:<n>`). The gate has already checked the
//! login; the socket also needs this boot's chat token in `Sec-WebSocket-Protocol` (the chat page carries it,
//! and no other site can read that page) and, from a browser, an `Origin` naming this server: a page elsewhere
//! cannot open it with the user's cookie.

use super::hub::{Answer, Join, Leave, UserSent};
use super::protocol::{ClientMessage, ServerMessage, ShownMessage};
use super::{ChatLink, chat_id_of, markup};
use crate::auth::SESSION_COOKIE;
use crate::gate::{Authenticated, cookie};
use crate::state::WebState;
use actix_web::http::header;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use futures_util::StreamExt;
use minibot_channel::http::ConnectionCloser;
use minibot_channel::messages::{Inbound, StopTurn, session_id};
use minibot_store::Role;
use std::sync::atomic::{AtomicU64, Ordering};

/// The subprotocol the page asks for and the server answers with; the token travels as a second one.
pub const PROTOCOL: &str = "minibot.chat";
/// The token's subprotocol is `auth.<token>`.
pub const TOKEN_PREFIX: &str = "auth.";
/// Longest frame the browser may send (a message's text is far below this).
const MAX_FRAME_BYTES: usize = 256 * 1024;
/// Longest message text, in characters.
pub const MAX_TEXT_CHARS: usize = 32_000;
/// Messages per history page, at most.
pub const HISTORY_PAGE: u32 = 30;
/// A history page's messages, in bytes as sent, at most (a single larger message still makes a page): the
/// server holds a few frames for a socket before it finds the browser not reading, and pages are the largest.
const HISTORY_PAGE_BYTES: usize = 256 * 1024;
/// Chat sockets one client (`minibot_channel::http::client_key`) may hold open at once: a tab needs one.
const MAX_SOCKETS_PER_CLIENT: usize = 16;
/// Longest frame written; a longer message goes in fragments (see [`send`]).
const FRAGMENT_BYTES: usize = 64 * 1024;
/// How long a close frame may take to go out before the connection is cut instead.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// How often an idle socket checks that its login session still holds (a frame from the browser checks at once).
const SESSION_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// Longest a frame may wait to be written out. The server writes as fast as the browser reads; a browser that
/// has stopped reading would otherwise hold the socket, and everything queued for it, for as long as it stays
/// connected.
const SEND_STALL: std::time::Duration = std::time::Duration::from_secs(15);

static NEXT_SOCKET: AtomicU64 = AtomicU64::new(1);

pub async fn open(req: HttpRequest, body: web::Payload, state: web::Data<WebState>) -> HttpResponse {
    let Some(chat_id) = chat_id_of(req.query_string()) else {
        return HttpResponse::BadRequest().body("c must be a chat number from 1 to 1000000");
    };
    let Some(link) = state.chat.get().cloned() else {
        return HttpResponse::ServiceUnavailable().body("The chat is not running yet.");
    };
    if !origin_allowed(&req) {
        tracing::warn!(origin = ?req.headers().get(header::ORIGIN), "chat socket from another origin refused");
        return HttpResponse::Forbidden().body("This socket only opens from this server's own pages.");
    }
    if !token_offered(&req, &state.chat_token) {
        tracing::warn!("chat socket without this boot's chat token refused");
        return HttpResponse::Forbidden().body("The chat token is missing or from an earlier start; reload the page.");
    }
    let place = state.chat_sockets.hold(req.peer_addr().map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip()));
    if place.count > MAX_SOCKETS_PER_CLIENT {
        return HttpResponse::TooManyRequests()
            .body(format!("At most {MAX_SOCKETS_PER_CLIENT} chat tabs may be open at once; close one."));
    }
    let (mut response, socket, stream) = match actix_ws::handle(&req, body) {
        Ok(parts) => parts,
        Err(error) => return HttpResponse::from_error(error),
    };
    response.headers_mut().insert(header::SEC_WEBSOCKET_PROTOCOL, header::HeaderValue::from_static(PROTOCOL));
    // A socket opened with a login session lives only as long as the session (logout, expiry).
    let session = match req.extensions().get::<Authenticated>() {
        Some(Authenticated::Session) => cookie(&req, SESSION_COOKIE),
        _ => None,
    };
    let stream =
        stream.max_frame_size(MAX_FRAME_BYTES).aggregate_continuations().max_continuation_size(MAX_FRAME_BYTES);
    let closer = ConnectionCloser::of(&req);
    actix_web::rt::spawn(async move {
        run(chat_id, socket, stream, state.into_inner(), link, session, closer).await;
        drop(place);
    });
    response
}

async fn run(
    chat_id: i64,
    mut session: actix_ws::Session,
    mut stream: actix_ws::AggregatedMessageStream,
    state: std::sync::Arc<WebState>,
    link: ChatLink,
    login: Option<String>,
    closer: Option<ConnectionCloser>,
) {
    let logged_out = || login.as_deref().is_some_and(|cookie| !state.sessions.is_valid(cookie));
    let mut recheck = tokio::time::interval(SESSION_RECHECK);
    let socket_id = NEXT_SOCKET.fetch_add(1, Ordering::Relaxed);
    let (tx, mut rx) = super::queue::socket_queue();
    if let Some(page) = history_page(&state, chat_id, None, true).await
        && !send(&mut session, page.to_json()).await
    {
        close(session, None, closer).await;
        return;
    }
    // The hub holds the only sender: when it lets go (the server is stopping), the socket closes.
    link.hub.do_send(Join { chat_id, socket_id, tx });
    loop {
        tokio::select! {
            _ = recheck.tick() => if logged_out() {
                break;
            },
            frame = stream.next() => match frame {
                Some(Ok(actix_ws::AggregatedMessage::Text(_))) if logged_out() => break,
                Some(Ok(actix_ws::AggregatedMessage::Text(text))) => {
                    if let Some(reply) = handle(&text, chat_id, socket_id, &state, &link).await
                        && !send(&mut session, reply.to_json()).await
                    {
                        break;
                    }
                }
                Some(Ok(actix_ws::AggregatedMessage::Ping(bytes))) => {
                    if !within(SEND_STALL, session.pong(&bytes)).await { break; }
                }
                Some(Ok(actix_ws::AggregatedMessage::Pong(_))) => {}
                Some(Ok(actix_ws::AggregatedMessage::Binary(_))) => {
                    let error = ServerMessage::Error { error: "binary frames are not read; upload files with the button".into() };
                    if !send(&mut session, error.to_json()).await { break; }
                }
                Some(Ok(actix_ws::AggregatedMessage::Close(_))) | None => break,
                Some(Err(error)) => {
                    tracing::debug!(%error, "chat socket read failed");
                    break;
                }
            },
            outgoing = rx.recv() => match outgoing {
                Some(text) => if !send(&mut session, text).await { break; },
                None => {
                    let why = if rx.fell_behind() { "the page fell too far behind" } else { "the server is stopping" };
                    let reason = actix_ws::CloseReason { code: actix_ws::CloseCode::Away, description: Some(why.into()) };
                    close(session, Some(reason), closer).await;
                    return;
                }
            },
        }
    }
    link.hub.do_send(Leave { chat_id, socket_id });
    let reason = logged_out().then(|| actix_ws::CloseReason {
        code: actix_ws::CloseCode::Policy,
        description: Some("the login ended".into()),
    });
    close(session, reason, closer).await;
}

/// Says goodbye with `reason`; a browser that does not take the close frame in time (it has stopped reading)
/// has its connection cut, and with it what the server still held for it.
async fn close(session: actix_ws::Session, reason: Option<actix_ws::CloseReason>, closer: Option<ConnectionCloser>) {
    if !within(CLOSE_WAIT, session.close(reason)).await
        && let Some(closer) = closer
    {
        closer.close();
    }
}

/// Writes one message; false when the socket has closed or has not taken it within [`SEND_STALL`]. A long
/// message goes in fragments of [`FRAGMENT_BYTES`]: the server holds a fixed number of frames for a socket before
/// a write waits, so fragments bound what a browser that stops reading can make it hold.
async fn send(session: &mut actix_ws::Session, text: String) -> bool {
    if text.len() <= FRAGMENT_BYTES {
        return within(SEND_STALL, session.text(text)).await;
    }
    let bytes = actix_web::web::Bytes::from(text.into_bytes());
    let mut start = 0;
    while start < bytes.len() {
        let end = (start + FRAGMENT_BYTES).min(bytes.len());
        let part = bytes.slice(start..end);
        let item = match (start, end == bytes.len()) {
            (0, _) => actix_ws::Item::FirstText(part),
            (_, true) => actix_ws::Item::Last(part),
            _ => actix_ws::Item::Continue(part),
        };
        if !within(SEND_STALL, session.continuation(item)).await {
            return false;
        }
        start = end;
    }
    true
}

/// Whether `write` went through within `limit`.
async fn within(limit: std::time::Duration, write: impl Future<Output = Result<(), actix_ws::Closed>>) -> bool {
    matches!(tokio::time::timeout(limit, write).await, Ok(Ok(())))
}

/// Acts on one frame; answers what goes back to this socket alone.
async fn handle(text: &str, chat_id: i64, socket_id: u64, state: &WebState, link: &ChatLink) -> Option<ServerMessage> {
    let message = match serde_json::from_str::<ClientMessage>(text) {
        Ok(message) => message,
        Err(error) => return Some(ServerMessage::Error { error: format!("unreadable message: {error}") }),
    };
    match message {
        ClientMessage::Message { text, upload_ids } => {
            if text.trim() == "/stop" {
                link.intake.stop.do_send(StopTurn { channel: super::CHANNEL.into(), chat_id });
                return None;
            }
            if text.chars().count() > MAX_TEXT_CHARS {
                return Some(ServerMessage::Error {
                    error: format!("The message is longer than {MAX_TEXT_CHARS} characters; nothing was sent."),
                });
            }
            let model_text = match state.uploads.take_for_message(chat_id, &text, &upload_ids) {
                Ok(Some(model_text)) => model_text,
                Ok(None) => return None,
                Err(error) => return Some(ServerMessage::Error { error }),
            };
            link.intake.inbound.do_send(Inbound::new(super::CHANNEL, chat_id, Some(chat_id), model_text));
            link.hub.do_send(UserSent { chat_id, socket_id, text });
            None
        }
        ClientMessage::Stop => {
            link.intake.stop.do_send(StopTurn { channel: super::CHANNEL.into(), chat_id });
            None
        }
        ClientMessage::Approval { approval_id, approved } => {
            link.hub.do_send(Answer { chat_id, approval_id, approved });
            None
        }
        ClientMessage::HistoryBefore { before_id } => history_page(state, chat_id, Some(before_id), false).await,
    }
}

/// A page of the chat's stored messages, oldest first.
async fn history_page(state: &WebState, chat_id: i64, before: Option<i64>, initial: bool) -> Option<ServerMessage> {
    let store = state.readers.history().ok()?;
    let session = session_id(super::CHANNEL, chat_id);
    let rows = match store.history_page(&session, before, HISTORY_PAGE).await {
        Ok(rows) => rows,
        Err(error) => {
            tracing::warn!(%error, %session, "cannot read the chat's history");
            return Some(ServerMessage::Error { error: "The history could not be read.".into() });
        }
    };
    let full = rows.len() as u32 == HISTORY_PAGE;
    let total = rows.len();
    // Newest first, until the page is full in bytes; the rest come with the next page.
    let mut messages = Vec::new();
    let mut bytes = 0;
    for row in rows.into_iter().rev() {
        let assistant = row.role == Role::Assistant;
        let shown = ShownMessage {
            id: Some(row.id),
            role: if assistant { "assistant" } else { "user" },
            html: assistant.then(|| markup::to_html(&row.content, minibot_agent::ReplyKind::Markdown)),
            text: row.content,
        };
        bytes += serde_json::to_vec(&shown).map_or(0, |json| json.len());
        if !messages.is_empty() && bytes > HISTORY_PAGE_BYTES {
            break;
        }
        messages.push(shown);
    }
    messages.reverse();
    let more = full || messages.len() < total;
    let before_id = more.then(|| messages.first().and_then(|m| m.id)).flatten();
    Some(ServerMessage::HistoryPage { initial, messages, before_id })
}

/// A browser always sends `Origin` with a socket; it must name the host the request went to. A client that
/// sends none is not a browser page (and still needs the login and the token).
fn origin_allowed(req: &HttpRequest) -> bool {
    let Some(origin) = req.headers().get(header::ORIGIN) else { return true };
    let Ok(origin) = origin.to_str() else { return false };
    let Some((scheme, authority)) = origin.split_once("://") else { return false };
    if !matches!(scheme, "http" | "https") {
        return false;
    }
    let named = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    named("host").is_some_and(|h| h.eq_ignore_ascii_case(authority))
        || named("x-forwarded-host").is_some_and(|h| h.eq_ignore_ascii_case(authority))
}

fn token_offered(req: &HttpRequest, token: &str) -> bool {
    use subtle::ConstantTimeEq;
    req.headers()
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|p| p.trim().strip_prefix(TOKEN_PREFIX))
        .any(|given| bool::from(given.as_bytes().ct_eq(token.as_bytes())))
}
