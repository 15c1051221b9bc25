//! Raw calls to the pod with its authenticated client: [`request`] for any
//! answer, and the typed calls the other modules use, which turn a non-2xx
//! answer into an [`ApiError`].

use std::time::Duration;

use anyhow::Context as _;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use testkit::pod::Pod;
use testkit::Cx;

use crate::ApiError;

/// How long one API request may take, unless it runs a command.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends one request to the pod with its authenticated client; returns the
/// status and body whatever the status. `path` starts with `/api/`.
pub async fn request(
    cx: &Cx,
    method: Method,
    path: &str,
    body: Body,
    timeout: Duration,
) -> anyhow::Result<(StatusCode, Vec<u8>)> {
    let pod = cx.pod()?;
    send(pod, method, path, body, timeout).await
}

/// A request body.
#[derive(Debug, Clone)]
pub enum Body {
    /// No body.
    Empty,
    /// A JSON document.
    Json(serde_json::Value),
    /// Raw bytes (file uploads).
    Bytes(Vec<u8>),
}

async fn send(
    pod: &Pod,
    method: Method,
    path: &str,
    body: Body,
    timeout: Duration,
) -> anyhow::Result<(StatusCode, Vec<u8>)> {
    let mut req = pod
        .client()
        .request(method.clone(), pod.url(path))
        .timeout(timeout);
    req = match body {
        Body::Empty => req,
        Body::Json(v) => req.json(&v),
        Body::Bytes(b) => req.body(b),
    };
    let resp = req
        .send()
        .await
        .with_context(|| format!("{method} {path}: request failed"))?;
    let status = resp.status();
    let bytes = resp
        .bytes()
        .await
        .with_context(|| format!("{method} {path}: reading the answer failed"))?;
    Ok((status, bytes.to_vec()))
}

/// Sends a request and decodes a 2xx JSON answer; any other status is an [`ApiError`].
pub(crate) async fn call<T: DeserializeOwned>(
    cx: &Cx,
    method: Method,
    path: &str,
    body: Body,
    timeout: Duration,
) -> anyhow::Result<T> {
    let (status, bytes) = request(cx, method.clone(), path, body, timeout).await?;
    if !status.is_success() {
        return Err(ApiError::from_answer(&method, path, status, &bytes).into());
    }
    serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{method} {path} answered {status} with an unexpected body: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(500)])
        )
    })
}

/// Sends a request whose answer body does not matter; returns the 2xx status.
pub(crate) async fn call_status(
    cx: &Cx,
    method: Method,
    path: &str,
    body: Body,
) -> anyhow::Result<StatusCode> {
    let (status, bytes) = request(cx, method.clone(), path, body, REQUEST_TIMEOUT).await?;
    if !status.is_success() {
        return Err(ApiError::from_answer(&method, path, status, &bytes).into());
    }
    Ok(status)
}

/// Percent-encodes a path segment or query value, as testkit's templates do.
pub use testkit::template::encode;
