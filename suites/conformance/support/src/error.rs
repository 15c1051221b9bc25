//! Every non-2xx answer of the API as an [`ApiError`], and [`expect_error`]
//! to check that a call failed the way the API documents.

use std::fmt;

use anyhow::anyhow;
use reqwest::{Method, StatusCode};
use serde::Deserialize;

/// A non-2xx answer of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The request's method.
    pub method: String,
    /// The request's path (never carries credentials).
    pub path: String,
    /// The HTTP status.
    pub status: u16,
    /// `error.code` of the answer, or `unparsed` when it was not the JSON error shape.
    pub code: String,
    /// `error.message` of the answer, or its raw text.
    pub message: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} answered {} {}: {}",
            self.method, self.path, self.status, self.code, self.message
        )
    }
}

impl std::error::Error for ApiError {}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    code: String,
    message: String,
}

impl ApiError {
    pub(crate) fn from_answer(
        method: &Method,
        path: &str,
        status: StatusCode,
        body: &[u8],
    ) -> ApiError {
        let (code, message) = match serde_json::from_slice::<ErrorBody>(body) {
            Ok(e) => (e.error.code, e.error.message),
            Err(_) => (
                "unparsed".to_owned(),
                format!(
                    "(not the JSON error shape) {}",
                    String::from_utf8_lossy(&body[..body.len().min(500)])
                ),
            ),
        };
        ApiError {
            method: method.to_string(),
            path: path.to_owned(),
            status: status.as_u16(),
            code,
            message,
        }
    }
}

/// Checks that `result` failed with an [`ApiError`] of `status` and `code`,
/// and returns it; anything else is an error that says what came instead.
pub fn expect_error<T: fmt::Debug>(
    result: anyhow::Result<T>,
    status: u16,
    code: &str,
) -> anyhow::Result<ApiError> {
    match result {
        Ok(value) => Err(anyhow!(
            "expected the API to refuse with {status} {code}, but it succeeded: {value:?}"
        )),
        Err(e) => match e.downcast_ref::<ApiError>() {
            Some(api) if api.status == status && api.code == code => Ok(api.clone()),
            Some(api) => Err(anyhow!("expected {status} {code}, got: {api}")),
            None => Err(e.context(format!(
                "expected the API to refuse with {status} {code}, but the request failed otherwise"
            ))),
        },
    }
}
