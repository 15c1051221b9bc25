//! Raw calls through `pod.send` (which renews an expired token), and the
//! error every non-2xx answer becomes.

use std::fmt;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use reqwest::Method;
use serde_json::Value;
use testkit::pod::Pod;

/// How long one API request may take.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends one request with the pod's credential; returns the status and the
/// JSON body (`Null` when empty) whatever the status. `path` starts with
/// `/api/`.
pub async fn request(
    pod: &Pod,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    let url = pod.url(path);
    let response = pod
        .send(|c| {
            let r = c.request(method.clone(), &url).timeout(REQUEST_TIMEOUT);
            match body {
                Some(b) => r.json(b),
                None => r,
            }
        })
        .await
        .with_context(|| format!("{method} {path}: request failed"))?;
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .with_context(|| format!("{method} {path}: reading the answer failed"))?;
    if bytes.is_empty() {
        return Ok((status, Value::Null));
    }
    let json = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{method} {path} answered {status} with a body that is not JSON: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
        )
    })?;
    Ok((status, json))
}

/// Sends a request and returns a 2xx answer's body; any other status is an
/// [`ApiError`].
pub async fn call(
    pod: &Pod,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<Value> {
    let (status, json) = request(pod, method.clone(), path, body).await?;
    if !(200..300).contains(&status) {
        return Err(ApiError::new(&method, path, status, &json).into());
    }
    Ok(json)
}

/// A non-2xx answer: PocketBase's `{"status", "message", "data"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The request's method.
    pub method: String,
    /// The request's path.
    pub path: String,
    /// The HTTP status.
    pub status: u16,
    /// `message` of the answer.
    pub message: String,
    /// `data` of the answer: per-field errors, `{field: {code, message}}`.
    pub data: Value,
}

impl ApiError {
    fn new(method: &Method, path: &str, status: u16, json: &Value) -> ApiError {
        ApiError {
            method: method.to_string(),
            path: path.to_owned(),
            status,
            message: json
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| json.to_string()),
            data: json.get("data").cloned().unwrap_or(Value::Null),
        }
    }

    /// The `code` of the error of `field` (`data.<field>.code`).
    pub fn field_code(&self, field: &str) -> Option<&str> {
        self.data.get(field)?.get("code")?.as_str()
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} answered {}: {} (data: {})",
            self.method, self.path, self.status, self.message, self.data
        )
    }
}

impl std::error::Error for ApiError {}

/// Checks that `result` failed with `status` and, when `field` is given as
/// `(name, code)`, with that field error. Says what came instead otherwise.
pub fn expect_error<T: fmt::Debug>(
    result: anyhow::Result<T>,
    status: u16,
    field: Option<(&str, &str)>,
) -> anyhow::Result<ApiError> {
    let err = match result {
        Ok(v) => {
            return Err(anyhow!(
                "expected HTTP {status}, but the call succeeded: {v:?}"
            ))
        }
        Err(e) => e,
    };
    let Some(api) = err.downcast_ref::<ApiError>() else {
        return Err(err.context(format!("expected HTTP {status}, got no answer")));
    };
    if api.status != status {
        return Err(anyhow!("expected HTTP {status}, got: {api}"));
    }
    if let Some((name, code)) = field {
        if api.field_code(name) != Some(code) {
            return Err(anyhow!(
                "expected the field error {name}: {code}, got: {api}"
            ));
        }
    }
    Ok(api.clone())
}

/// One page of a PocketBase listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The items of this page.
    pub items: Vec<Value>,
    /// The page number, from 1.
    pub page: u64,
    /// The page size.
    pub per_page: u64,
    /// Items across all pages.
    pub total_items: i64,
    /// Pages.
    pub total_pages: i64,
}

impl Page {
    pub(crate) fn parse(json: &Value, what: &str) -> anyhow::Result<Page> {
        let num = |key: &str| {
            json.get(key)
                .and_then(Value::as_i64)
                .ok_or_else(|| anyhow!("{what}: the listing has no number `{key}`: {json}"))
        };
        Ok(Page {
            items: json
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .ok_or_else(|| anyhow!("{what}: the listing has no `items` array: {json}"))?,
            page: num("page")? as u64,
            per_page: num("perPage")? as u64,
            total_items: num("totalItems")?,
            total_pages: num("totalPages")?,
        })
    }

    /// The string field `key` of every item, in order.
    pub fn strings(&self, key: &str) -> Vec<String> {
        self.items
            .iter()
            .filter_map(|i| i.get(key).and_then(Value::as_str).map(str::to_owned))
            .collect()
    }
}
