//! Raw calls through `pod.send` (which renews an expired token), and the
//! error every non-2xx answer becomes.

use std::fmt;
use std::time::Duration;

use anyhow::{anyhow, Context as _};
use reqwest::Method;
use serde_json::Value;
use testkit::pod::Pod;
use testkit::resource::OpError;
use testkit::template::encode;

/// How long one API request may take.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times one request is sent again after PB-2.
const PB2_RESENDS: u32 = 5;

/// Sends one request with the pod's credential; returns the status and the
/// JSON body (`Null` when empty) whatever the status. `path` starts with
/// `/api/`.
///
/// An answer that may come from PB-2 (KNOWN-ISSUES.md: PocketBase's cache
/// of collections disagreeing with its database) is checked against the
/// database: a 404 for a collection that is there, or a collection's `GET`
/// answered for one that is not. Then the cache is reloaded, a line on
/// stderr says so, and the request is sent again. So what this returns is
/// PocketBase's answer with a cache that agrees with the database.
pub async fn request(
    pod: &Pod,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    let mut answer = send(pod, &method, path, body).await?;
    for resend in 1..=PB2_RESENDS {
        let Some((collection, in_cache)) = cached_answer(&method, path, &answer) else {
            break;
        };
        let in_database = collection_in_database(pod, collection).await?;
        if in_cache == in_database {
            break;
        }
        reload_collection_cache(pod).await?;
        let (cache, database) = match in_cache {
            true => ("has it", "is not in the database"),
            false => ("lacks it", "is in the database"),
        };
        eprintln!(
            "PB-2 (KNOWN-ISSUES.md): {method} {path} answered {} {}: PocketBase's cache of \
             collections {cache}, but collection {collection} {database}; reloaded the cache, \
             sending the request again ({resend} of {PB2_RESENDS})",
            answer.0, answer.1
        );
        answer = send(pod, &method, path, body).await?;
    }
    Ok(answer)
}

/// Whether `collection` (a name or an id) is in PocketBase's database. The listing of
/// collections is read from the database; every other route of one
/// collection looks it up in the cache first (even `PATCH`, whose save
/// fails with "failed to retrieve old cached collection" when the cache
/// lacks it).
pub async fn collection_in_database(pod: &Pod, collection: &str) -> anyhow::Result<bool> {
    // By name or by id, as the routes of one collection take either.
    let quoted = crate::quote(collection);
    let filter = format!("name={quoted}||id={quoted}");
    let path = format!(
        "/api/collections?filter={}&fields=name&perPage=1",
        encode(&filter)
    );
    match send(pod, &Method::GET, &path, None).await? {
        (200, json) => match json.pointer("/items").and_then(Value::as_array) {
            Some(items) => Ok(!items.is_empty()),
            None => Err(anyhow!("GET {path} answered 200 without `items`: {json}")),
        },
        (status, json) => Err(ApiError::new(&Method::GET, &path, status, &json).into()),
    }
}

/// Reloads PocketBase's cache of collections (PB-2) by saving the system
/// collection `_superusers` unchanged: every save of a collection reloads
/// the cache, and that one is in every PocketBase.
pub async fn reload_collection_cache(pod: &Pod) -> anyhow::Result<()> {
    let path = "/api/collections/_superusers";
    match send(pod, &Method::PATCH, path, Some(&serde_json::json!({}))).await? {
        (200, _) => Ok(()),
        (status, json) => Err(ApiError::new(&Method::PATCH, path, status, &json).into()),
    }
}

/// The collection of `path`, and whether `answer` says PocketBase's cache
/// of collections has it, when `answer` comes from a lookup in that cache:
/// a 404 of a collection's own route (`/api/collections/{name}`, which says
/// nothing more) or of one of its records routes saying "Missing …
/// collection context" (it lacks it), or a 2xx `GET` of the collection's
/// own route (it has it).
fn cached_answer<'p>(
    method: &Method,
    path: &'p str,
    answer: &(u16, Value),
) -> Option<(&'p str, bool)> {
    let rest = path.strip_prefix("/api/collections/")?;
    let rest = rest.split('?').next().unwrap_or(rest);
    let (collection, tail) = rest.split_once('/').unwrap_or((rest, ""));
    // Names of the suite are `\w+`: nothing to decode.
    if collection.is_empty() || collection.contains('%') {
        return None;
    }
    let message = answer
        .1
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("");
    let records = tail == "records" || tail.starts_with("records/");
    match answer.0 {
        404 if tail.is_empty() => Some((collection, false)),
        404 if records && message.contains("collection context") => Some((collection, false)),
        200..=299 if tail.is_empty() && method == Method::GET => Some((collection, true)),
        _ => None,
    }
}

/// One request, as it is answered: [`request`] without its mending of
/// PB-2, for a test of PB-2 itself.
pub async fn raw_request(
    pod: &Pod,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Value)> {
    send(pod, &method, path, body).await
}

/// One request, as it is answered.
async fn send(
    pod: &Pod,
    method: &Method,
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

/// A status as a kind's error: 429 and 5xx are transient.
pub(crate) fn classify(status: u16, message: String) -> OpError {
    if status == 429 || status >= 500 {
        OpError::Transient(message)
    } else {
        OpError::Permanent(message)
    }
}

/// A failed call as a kind's error: an answer by its status, no answer as
/// transient.
pub(crate) fn op<T>(result: anyhow::Result<T>) -> Result<T, OpError> {
    result.map_err(|e| match e.downcast_ref::<ApiError>() {
        Some(api) => classify(api.status, api.to_string()),
        None => OpError::Transient(format!("{e:#}")),
    })
}

/// A kind's delete: `DELETE path`, accepted on 2xx and 404 (gone already:
/// [`request`] has checked a collection's 404 against the database).
pub(crate) async fn delete(pod: &Pod, path: &str) -> Result<(), OpError> {
    let (status, json) = op(request(pod, Method::DELETE, path, None).await)?;
    match status {
        200..=299 | 404 => Ok(()),
        _ => Err(classify(
            status,
            format!("DELETE {path} answered {status}: {json}"),
        )),
    }
}
