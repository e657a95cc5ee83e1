//! Webhook mode: the route on the daemon's HTTP server that takes Telegram's POSTs and hands each update to the [`UpdateSink`].
//! The answer is what tells Telegram whether to deliver again: 200 only once the sink has recorded the update,
//! 500 when it could not (Telegram redelivers), 401 without the shared secret (the body is never read).

use super::updates::{Incoming, UpdateSink};
use actix_web::{HttpRequest, HttpResponse, web};
use frankenstein::updates::Update;
use minibot_channel::HttpMount;
use std::future::Future;
use std::net::SocketAddr;

/// The header Telegram sends with the `secret_token` given to `setWebhook`.
pub const SECRET_HEADER: &str = "X-Telegram-Bot-Api-Secret-Token";

/// Telegram's updates are a few kilobytes; anything near this is not one.
const BODY_LIMIT: usize = 1024 * 1024;

/// Telegram's webhook POSTs to `path` on `listen`, for the daemon's HTTP server (see [`path_of`]).
pub fn mount(listen: SocketAddr, path: &str, secret: String, sink: UpdateSink) -> HttpMount {
    mount_with(listen, path, secret, sink)
}

/// Where the server hands updates: the [`UpdateSink`], or a stand-in in tests.
trait Deliver: Clone + Send + Sync + 'static {
    fn deliver(&self, updates: Vec<Update>) -> impl Future<Output = Result<(), String>>;
}

impl Deliver for UpdateSink {
    fn deliver(&self, updates: Vec<Update>) -> impl Future<Output = Result<(), String>> {
        self.handle(updates.into_iter().map(|update| Incoming::Update(Box::new(update))).collect())
    }
}

struct State<D> {
    secret: String,
    sink: D,
}

fn mount_with<D: Deliver>(listen: SocketAddr, path: &str, secret: String, sink: D) -> HttpMount {
    let path = path.to_owned();
    HttpMount::new(listen, "channels.telegram.webhook_listen", "Telegram webhook", move |config| {
        let state = web::Data::new(State { secret: secret.clone(), sink: sink.clone() });
        config.service(web::resource(path.as_str()).app_data(state).route(web::post().to(receive::<D>)));
    })
}

async fn receive<D: Deliver>(req: HttpRequest, payload: web::Payload, state: web::Data<State<D>>) -> HttpResponse {
    let given = req.headers().get(SECRET_HEADER).map(|v| v.as_bytes()).unwrap_or_default();
    if !secret_matches(given, state.secret.as_bytes()) {
        let peer = req.peer_addr().map(|a| a.to_string()).unwrap_or_else(|| "unknown".into());
        tracing::warn!(%peer, "webhook request without the right secret token; refused");
        return HttpResponse::Unauthorized().finish();
    }
    let body = match payload.to_bytes_limited(BODY_LIMIT).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not read a webhook request body");
            return HttpResponse::BadRequest().finish();
        }
        Err(_) => {
            tracing::warn!(limit = BODY_LIMIT, "webhook request body too large; refused");
            return HttpResponse::PayloadTooLarge().finish();
        }
    };
    let update = match serde_json::from_slice::<Update>(&body) {
        Ok(update) => update,
        Err(e) => return unreadable(&body, &e),
    };
    match state.sink.deliver(vec![update]).await {
        Ok(()) => HttpResponse::Ok().finish(),
        Err(e) => {
            tracing::warn!(error = %e, "could not record a webhook update; Telegram will deliver it again");
            HttpResponse::InternalServerError().finish()
        }
    }
}

/// A body that is not an [`Update`]. One that still carries an `update_id` is a kind of update this bot does not
/// read (or one the library cannot parse): redelivering it would fail the same way, so it is acknowledged and
/// skipped. Anything else is not from Telegram and gets a 400.
fn unreadable(body: &[u8], error: &serde_json::Error) -> HttpResponse {
    let update_id = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("update_id").and_then(serde_json::Value::as_i64));
    match update_id {
        Some(update_id) => {
            tracing::warn!(update_id, error = %error, "webhook update of a kind this bot does not read; skipped");
            HttpResponse::Ok().finish()
        }
        None => {
            tracing::warn!(error = %error, "webhook request body is not a Telegram update");
            HttpResponse::BadRequest().finish()
        }
    }
}

/// Compares in time that depends only on the expected secret's length, so timing does not reveal how much of a
/// guess was right.
fn secret_matches(given: &[u8], expected: &[u8]) -> bool {
    let mut diff = given.len() ^ expected.len();
    for (i, byte) in expected.iter().enumerate() {
        diff |= usize::from(byte ^ given.get(i).copied().unwrap_or(0));
    }
    std::hint::black_box(diff) == 0
}

/// The path of `webhook_url` without its query or fragment; "/" when it has none. `https://host:8443/tg?x=1` →
/// `/tg`.
pub fn path_of(webhook_url: &str) -> String {
    let rest = match webhook_url.split_once("://") {
        Some((_, rest)) => rest,
        None => webhook_url,
    };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    match rest.find('/') {
        Some(start) => rest[start..].to_owned(),
        None => "/".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use crate::webhook::*;
    use minibot_channel::http::serve;
    use std::sync::{Arc, Mutex};

    #[test]
    fn the_path_is_taken_from_the_url() {
        assert_eq!(path_of("https://bot.example.com/telegram/hook"), "/telegram/hook");
        assert_eq!(path_of("https://bot.example.com:8443/tg?x=1#y"), "/tg");
        assert_eq!(path_of("https://bot.example.com"), "/");
        assert_eq!(path_of("https://bot.example.com?x=1"), "/");
        assert_eq!(path_of("https://bot.example.com/"), "/");
        assert_eq!(path_of(""), "/");
    }

    #[test]
    fn only_the_exact_secret_matches() {
        assert!(secret_matches(b"s3cret", b"s3cret"));
        assert!(!secret_matches(b"s3creT", b"s3cret"));
        assert!(!secret_matches(b"s3cre", b"s3cret"));
        assert!(!secret_matches(b"s3cret!", b"s3cret"));
        assert!(!secret_matches(b"", b"s3cret"));
        assert!(!secret_matches(b"s3cret\0", b"s3cret"));
    }

    /// Records update ids, or fails when told to.
    #[derive(Clone, Default)]
    struct Recorder {
        seen: Arc<Mutex<Vec<u32>>>,
        fail: bool,
    }

    impl Deliver for Recorder {
        fn deliver(&self, updates: Vec<Update>) -> impl Future<Output = Result<(), String>> {
            let result = if self.fail {
                Err("database is down".to_owned())
            } else {
                self.seen.lock().unwrap().extend(updates.iter().map(|u| u.update_id));
                Ok(())
            };
            std::future::ready(result)
        }
    }

    const UPDATE: &str =
        r#"{"update_id":7,"message":{"message_id":1,"date":0,"chat":{"id":42,"type":"private"},"text":"hi"}}"#;

    /// One HTTP/1.1 request over a plain socket; returns the status and the body. The response is read by its
    /// length, not to the end, because the server may keep the connection open.
    async fn post(addr: SocketAddr, path: &str, secret: Option<&str>, body: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let secret = secret.map(|s| format!("{SECRET_HEADER}: {s}\r\n")).unwrap_or_default();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n{secret}\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        // The server may refuse before reading the body (401, 413); it need not take all of it then.
        let _ = stream.write_all(body.as_bytes()).await;
        let mut received = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&received).into_owned();
            if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                    .map_or(0, |v| v.parse::<usize>().unwrap());
                if rest.len() >= length {
                    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
                    return (status, rest[..length].to_owned());
                }
            }
            let read = stream.read(&mut chunk).await.unwrap();
            assert!(read > 0, "connection closed before a full response: {text}");
            received.extend_from_slice(&chunk[..read]);
        }
    }

    #[test]
    fn requests_are_answered_by_what_became_of_the_update() {
        actix::System::new().block_on(async {
            let recorder = Recorder::default();
            let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
            let server = serve(vec![mount_with(listen, "/hook", "s3cret".into(), recorder.clone())]).unwrap();
            let addr = server.local_addr(listen).unwrap();
            assert_ne!(addr.port(), 0);

            assert_eq!(post(addr, "/hook", None, UPDATE).await.0, 401);
            assert_eq!(post(addr, "/hook", Some("wrong"), UPDATE).await.0, 401);
            assert!(recorder.seen.lock().unwrap().is_empty());

            assert_eq!(post(addr, "/hook", Some("s3cret"), "not json").await.0, 400);
            assert_eq!(post(addr, "/hook", Some("s3cret"), r#"{"update_id":8,"new_kind":{}}"#).await.0, 200);
            assert_eq!(post(addr, "/hook", Some("s3cret"), UPDATE).await, (200, String::new()));
            assert_eq!(post(addr, "/other", Some("s3cret"), UPDATE).await.0, 404);
            assert_eq!(*recorder.seen.lock().unwrap(), vec![7]);

            let big = format!(r#"{{"update_id":9,"pad":"{}"}}"#, "x".repeat(BODY_LIMIT));
            assert_eq!(post(addr, "/hook", Some("s3cret"), &big).await.0, 413);
            server.stop().await;

            let failing = Recorder { fail: true, ..Recorder::default() };
            let server = serve(vec![mount_with(listen, "/", "s3cret".into(), failing)]).unwrap();
            assert_eq!(post(server.local_addr(listen).unwrap(), "/", Some("s3cret"), UPDATE).await.0, 500);
            server.stop().await;
        });
    }
}
