//! The checks every request to the web UI passes before its handler runs, in this order:
//! 1. with no credentials configured, the `Host` must be a loopback name, so that a web page that rebinds its
//!    own domain to 127.0.0.1 (DNS rebinding) is not served;
//! 2. a state-changing request (anything but GET, HEAD, OPTIONS) sent from another site is refused, by
//!    `Sec-Fetch-Site` and by `Origin`;
//! 3. outside the few public routes, the request must carry a session cookie or an `Authorization` header
//!    that matches; a client past the failure limits is refused before its credentials are even compared.

use crate::auth::SESSION_COOKIE;
use crate::state::WebState;
use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpResponse, web};
use std::net::{IpAddr, Ipv4Addr};

/// Routes anyone may reach: the health check, the login page and the static files it needs (and the icon a
/// browser asks for on its own).
fn is_public(path: &str) -> bool {
    matches!(path, "/health" | "/login" | "/favicon.ico") || path.starts_with("/static/")
}

pub async fn check(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, actix_web::Error> {
    let Some(state) = req.app_data::<web::Data<WebState>>().cloned() else {
        return Ok(req.into_response(HttpResponse::InternalServerError().finish()).map_into_right_body());
    };
    if state.credentials.is_open() && !host_is_loopback(req.headers().get(header::HOST)) {
        tracing::warn!(host = ?req.headers().get(header::HOST), "request for another host name refused");
        let refusal = plain(StatusCode::MISDIRECTED_REQUEST, "This server answers only at a loopback address.");
        return Ok(req.into_response(refusal).map_into_right_body());
    }
    if !is_safe_method(req.method()) && is_cross_site(&req) {
        tracing::warn!(path = req.path(), "cross-site request refused");
        let refusal = plain(StatusCode::FORBIDDEN, "Cross-site requests are refused.");
        return Ok(req.into_response(refusal).map_into_right_body());
    }
    if is_public(req.path()) || state.credentials.is_open() {
        return next.call(req).await.map(ServiceResponse::map_into_left_body);
    }
    if cookie(&req, SESSION_COOKIE).is_some_and(|value| state.sessions.is_valid(&value)) {
        req.extensions_mut().insert(Authenticated::Session);
        return next.call(req).await.map(ServiceResponse::map_into_left_body);
    }
    let client = client_address(&req);
    if let Some(header) = req.headers().get(header::AUTHORIZATION) {
        let value = header.to_str().unwrap_or_default();
        // Blocked for its own failures: refused, right or wrong. Blocked because of everyone's: only a strong
        // token gets through.
        let blocked = state
            .failures
            .blocked_address(client)
            .or_else(|| state.failures.blocked_everyone().filter(|_| !state.credentials.strong_bearer_matches(value)));
        if let Some(wait) = blocked {
            return Ok(req.into_response(crate::pages::too_many(wait)).map_into_right_body());
        }
        if state.credentials.header_matches(value) {
            req.extensions_mut().insert(Authenticated::Header);
            return next.call(req).await.map(ServiceResponse::map_into_left_body);
        }
        state.failures.record(client);
        tracing::warn!(%client, path = req.path(), "wrong credentials");
    }
    let refusal = if wants_html(&req) && req.method() == Method::GET {
        HttpResponse::SeeOther().insert_header((header::LOCATION, "/login")).finish()
    } else {
        let scheme = if state.credentials.has_basic() { "Basic" } else { "Bearer" };
        let mut response = plain(StatusCode::UNAUTHORIZED, "Authentication required.");
        if let Ok(value) = header::HeaderValue::from_str(&format!("{scheme} realm=\"minibot\"")) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    };
    Ok(req.into_response(refusal).map_into_right_body())
}

/// How a request proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authenticated {
    Session,
    Header,
}

fn plain(status: StatusCode, text: &'static str) -> HttpResponse {
    HttpResponse::build(status).content_type("text/plain; charset=utf-8").body(text)
}

fn is_safe_method(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// A browser says where a request comes from with `Sec-Fetch-Site` (current browsers) and `Origin` (all
/// state-changing requests). Either one saying "another site" is enough to refuse. A client that sends
/// neither (curl, a script) is not a browser that can be tricked into sending the user's cookie.
fn is_cross_site(req: &ServiceRequest) -> bool {
    let fetch_site = req.headers().get("sec-fetch-site").and_then(|v| v.to_str().ok());
    match fetch_site {
        // Set by the browser itself, never by a page: it has the last word where it is sent.
        Some("same-origin") => return false,
        Some(_) => return true,
        None => {}
    }
    match req.headers().get(header::ORIGIN).map(|v| v.to_str()) {
        None => false,
        Some(Ok(origin)) => !origin_matches_host(origin, req),
        Some(Err(_)) => true,
    }
}

/// `Origin: https://host:port` names the host the request was sent to (by `Host`, or `X-Forwarded-Host`
/// behind a proxy). `null` (a sandboxed frame, a redirect across sites) never matches.
fn origin_matches_host(origin: &str, req: &ServiceRequest) -> bool {
    let Some((_, authority)) = origin.split_once("://") else {
        return false;
    };
    let host = |name: header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let forwarded = req.headers().get("x-forwarded-host").and_then(|v| v.to_str().ok()).map(str::trim);
    host(header::HOST).is_some_and(|h| h.eq_ignore_ascii_case(authority))
        || forwarded.is_some_and(|h| h.eq_ignore_ascii_case(authority))
}

/// `127.0.0.1`, `[::1]` or `localhost`, with or without a port.
fn host_is_loopback(host: Option<&header::HeaderValue>) -> bool {
    let Some(host) = host.and_then(|h| h.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        // `[::1]` or `[::1]:port`, nothing else after the bracket.
        Some(rest) => match rest.split_once(']') {
            Some((name, "")) => name,
            Some((name, port)) if port.strip_prefix(':').is_some_and(|p| p.chars().all(|c| c.is_ascii_digit())) => name,
            _ => return false,
        },
        None => host
            .rsplit_once(':')
            .map_or(host, |(name, port)| if port.chars().all(|c| c.is_ascii_digit()) { name } else { host }),
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn wants_html(req: &ServiceRequest) -> bool {
    req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("text/html"))
}

/// The peer's address. Behind a reverse proxy every client is the proxy, so the limits then apply to all
/// clients together; `X-Forwarded-For` is not trusted, since anyone can send it.
pub fn client_address(req: &ServiceRequest) -> IpAddr {
    req.peer_addr().map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |a| a.ip())
}

/// A cookie's value from the `Cookie` header.
pub fn cookie(req: &impl HttpMessage, name: &str) -> Option<String> {
    let headers = req.headers();
    headers.get_all(header::COOKIE).filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then(|| value.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised() {
        let host = |h: &'static str| host_is_loopback(Some(&header::HeaderValue::from_static(h)));
        for h in ["127.0.0.1", "127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:8080", "[::1]", "127.1.2.3"] {
            assert!(host(h), "{h}");
        }
        for h in [
            "example.com",
            "127.0.0.1.nip.io",
            "evil.com:127",
            "10.0.0.1:8080",
            "[::2]:80",
            "localhost.evil",
            "[::1]evil.com",
        ] {
            assert!(!host(h), "{h}");
        }
        assert!(!host_is_loopback(None));
    }
}
