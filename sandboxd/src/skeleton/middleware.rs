//! What runs around every request: the log line and the `crash-after`
//! fault, authentication (token or session cookie), and the JSON shape of
//! every error answer.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::{Gate, FILE_BODY_LIMIT, JSON_BODY_LIMIT};
use crate::api::{ErrorBody, ErrorDetail, SESSION_COOKIE};
use crate::error::ApiError;
use crate::state::SESSION_TTL;

/// One log line per request (never the query string: it may hold the token),
/// and the `crash-after` fault.
pub(crate) async fn log_and_count(
    State(gate): State<Arc<Gate>>,
    req: Request,
    next: Next,
) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let t0 = Instant::now();
    let has_body = req.headers().contains_key(header::TRANSFER_ENCODING)
        || req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    let mut nth = None;
    if let Some(limit) = gate.faults.crash_after {
        if path != "/api/health" {
            let n = gate.requests.fetch_add(1, Ordering::SeqCst) + 1;
            if n > limit {
                eprintln!("sandboxd: fault crash-after={limit}: aborting");
                std::process::abort();
            }
            nth = Some((n, limit));
        }
    }
    let mut resp = next.run(req).await;
    if has_body && (resp.status().is_client_error() || resp.status().is_server_error()) {
        // The body may be left unread (e.g. 413): the connection cannot be reused,
        // so say so instead of letting the client find out on its next request.
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    eprintln!(
        "sandboxd: {method} {path} {} {}ms",
        resp.status().as_u16(),
        t0.elapsed().as_millis()
    );
    if let Some((n, limit)) = nth {
        if n == limit {
            // Let this last answer go out, then die without cleaning anything up.
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                eprintln!("sandboxd: fault crash-after={limit}: aborting");
                std::process::abort();
            });
        }
    }
    resp
}

fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_string())
}

fn presented_token(req: &Request) -> Option<String> {
    if let Some(v) = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let v = v.trim();
        if let Some((scheme, rest)) = v.split_once(' ') {
            if scheme.eq_ignore_ascii_case("bearer") {
                return Some(rest.trim().to_string());
            }
        }
        return Some(String::new());
    }
    let pairs = Query::<Vec<(String, String)>>::try_from_uri(req.uri())
        .ok()?
        .0;
    pairs
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
}

/// Paths anyone may fetch: the health check and the web UI's sign-in page
/// and assets (the page itself shows nothing of the pod before sign-in).
fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/api/health" | "/" | "/ui/sign-in" | "/ui/app.js" | "/ui/app.css"
    )
}

/// Whether the request carries a live session cookie.
pub(crate) fn has_session(gate: &Gate, headers: &HeaderMap) -> bool {
    cookie_value(headers, SESSION_COOKIE).is_some_and(|sid| gate.store.session_valid(&sid))
}

/// Checks a presented token: right, and within the token window.
pub(crate) fn check_token(gate: &Gate, token: &str) -> Result<(), ApiError> {
    let expected = gate.store.token().as_bytes();
    if !bool::from(token.as_bytes().ct_eq(expected)) {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "invalid credentials",
        ));
    }
    if gate.started.elapsed() > gate.window {
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "token_expired",
            format!(
                "the token expired: it is accepted only during the first {} after start; use the session cookie `{SESSION_COOKIE}` opened by an earlier request",
                humantime::format_duration(gate.window)
            ),
        ));
    }
    Ok(())
}

/// Opens a session; answers the `Set-Cookie` value that carries it.
pub(crate) fn open_session(gate: &Gate) -> Option<HeaderValue> {
    let sid = gate.store.new_session();
    let cookie = format!(
        "{SESSION_COOKIE}={sid}; Max-Age={}; HttpOnly; Path=/",
        SESSION_TTL.as_secs()
    );
    HeaderValue::from_str(&cookie).ok()
}

pub(crate) async fn auth(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    if gate.faults.log_credentials {
        // The fault: a service that logs what it is sent, credentials and all.
        let token = presented_token(&req).filter(|t| !t.is_empty());
        let session = cookie_value(req.headers(), SESSION_COOKIE);
        if token.is_some() || session.is_some() {
            eprintln!(
                "sandboxd: fault log-credentials: {} {} token={} session={}",
                req.method(),
                req.uri().path(),
                token.as_deref().unwrap_or("-"),
                session.as_deref().unwrap_or("-")
            );
        }
    }
    if is_public(req.uri().path()) || has_session(&gate, req.headers()) {
        return next.run(req).await;
    }
    let Some(token) = presented_token(&req) else {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "authentication required: send `Authorization: Bearer TOKEN` (or ?token=) or the session cookie",
        )
        .into_response();
    };
    if let Err(e) = check_token(&gate, &token) {
        return e.into_response();
    }
    let cookie = open_session(&gate);
    let mut resp = next.run(req).await;
    if let Some(v) = cookie {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

/// Turns every non-JSON error answer (extractor rejections) into the JSON error shape.
pub(crate) async fn jsonify_errors(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let own_shape = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        // The web UI's own pages say what went wrong in HTML.
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/html"));
    if own_shape {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let mut message = String::from_utf8_lossy(&text).trim().to_string();
    let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    let code = match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ => "error",
    };
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        message = format!("request body too large (limits: {JSON_BODY_LIMIT} bytes for JSON, {FILE_BODY_LIMIT} bytes for files): {message}");
    }
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("error").to_string();
    }
    parts.status = status;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let body = ErrorBody {
        error: ErrorDetail {
            code: code.to_string(),
            message,
        },
    };
    Response::from_parts(
        parts,
        Body::from(serde_json::to_vec(&body).expect("serialisable")),
    )
}
