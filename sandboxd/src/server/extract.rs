//! Request body extractors whose every failure is a JSON 4xx.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{header, StatusCode};
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::skeleton::{FILE_BODY_LIMIT, JSON_BODY_LIMIT};

/// A JSON body: content type checked, size limited, unknown fields refused, every failure a JSON 4xx.
pub(super) struct ApiJson<T>(pub(super) T);

pub(super) fn body_error(e: BytesRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body too large (limits: {JSON_BODY_LIMIT} bytes for JSON, {FILE_BODY_LIMIT} bytes for files)"),
        )
    } else {
        ApiError::bad_request(format!(
            "failed to read the request body: {}",
            e.body_text()
        ))
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let ct = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let mime = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if !(mime == "application/json"
            || (mime.starts_with("application/") && mime.ends_with("+json")))
        {
            let got = if ct.is_empty() {
                "none".to_string()
            } else {
                format!("{ct:?}")
            };
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!("expected `Content-Type: application/json`, got {got}"),
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(body_error)?;
        serde_json::from_slice(&bytes).map(ApiJson).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!("invalid JSON body: {e}"),
            )
        })
    }
}
