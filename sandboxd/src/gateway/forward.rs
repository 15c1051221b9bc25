//! Relaying one request to a worker and its answer back, and the 503 a
//! gateway answers for a worker it cannot use.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderName, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::placement::Worker;

/// How long a worker may take to answer a forwarded request (an exec gets
/// its own timeout on top).
pub(crate) const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);

/// Headers that belong to one connection, not to the request or answer
/// (RFC 9110 section 7.6.1), plus those the gateway sets itself: `Host` and
/// `Content-Length` are the client library's, and cookies are sessions of
/// the gateway on the client's side and of the worker on the gateway's.
const NOT_RELAYED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "cookie",
    "set-cookie",
];

fn relayed(name: &HeaderName) -> bool {
    !NOT_RELAYED.contains(&name.as_str())
}

/// A worker's answer, headers already filtered.
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Answer {
    /// The answer as the client gets it, body unchanged.
    pub(crate) fn into_response(self) -> Response {
        let mut resp = Response::new(Body::from(self.body));
        *resp.status_mut() = self.status;
        *resp.headers_mut() = self.headers;
        resp
    }

    /// The answer with `body` as its JSON body instead.
    pub(crate) fn with_json(self, body: &Value) -> Response {
        let mut headers = self.headers;
        headers.remove(header::CONTENT_TYPE);
        let mut resp = (self.status, Json(body)).into_response();
        resp.headers_mut().extend(headers);
        resp
    }
}

/// Why a worker gave no answer.
pub(crate) struct Unreachable {
    /// What happened, for the error message.
    pub(crate) cause: String,
    /// The connection was refused or failed: the worker is not there.
    pub(crate) refused: bool,
}

/// Sends `method path_and_query` with the client's headers and `body` to
/// worker `w`, waiting at most `timeout` for the whole answer.
pub(crate) async fn forward(
    w: &Worker,
    method: Method,
    path_and_query: &str,
    headers: &HeaderMap,
    body: Bytes,
    timeout: Duration,
) -> Result<Answer, Unreachable> {
    let mut req = w
        .client
        .request(method, format!("{}{path_and_query}", w.url))
        .timeout(timeout)
        .body(body);
    for (k, v) in headers.iter().filter(|(k, _)| relayed(k)) {
        req = req.header(k, v);
    }
    let resp = req.send().await.map_err(|e| unreachable(&e, timeout))?;
    let status = resp.status();
    let mut out = HeaderMap::new();
    for (k, v) in resp.headers().iter().filter(|(k, _)| relayed(k)) {
        out.append(k.clone(), v.clone());
    }
    let body = resp.bytes().await.map_err(|e| unreachable(&e, timeout))?;
    Ok(Answer {
        status,
        headers: out,
        body,
    })
}

/// The innermost cause of a client error (reqwest's own text repeats the
/// URL at every level), or the timeout.
fn unreachable(e: &reqwest::Error, timeout: Duration) -> Unreachable {
    if e.is_timeout() {
        return Unreachable {
            cause: format!(
                "it did not answer within {}",
                humantime::format_duration(timeout)
            ),
            refused: false,
        };
    }
    let mut inner: &dyn std::error::Error = e;
    while let Some(s) = inner.source() {
        inner = s;
    }
    Unreachable {
        cause: format!("the request failed: {inner}"),
        refused: e.is_connect(),
    }
}

/// 503 naming the worker: `{"error": {"code", "message", "worker"}}`.
pub(crate) fn unavailable(w: &Worker, code: &str, message: String) -> Response {
    let body = json!({
        "error": {"code": code, "message": message, "worker": w.name},
    });
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}
