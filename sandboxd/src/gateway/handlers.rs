//! The gateway's endpoints: its own health, capabilities and cluster view,
//! the merged listing, and every sandbox request relayed to its worker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use super::forward::{forward, unavailable, Answer, FORWARD_TIMEOUT};
use super::placement::{Refused, Worker};
use super::Gateway;
use crate::api::{Capabilities, Health, Limits, Sandbox, SandboxList};
use crate::error::ApiError;
use crate::listing::{hex, parse_list_query, ListQuery};

type GatewayState = State<Arc<Gateway>>;

/// A sandbox as the gateway shows it: the worker's object plus `worker`,
/// with `state: lost` when that worker is down.
fn sandbox_json(sb: &Sandbox, w: &Worker, lost: bool) -> Value {
    let mut v = serde_json::to_value(sb).expect("serialisable");
    v["worker"] = json!(w.name);
    if lost {
        v["state"] = json!("lost");
    }
    v
}

/// The client's headers, with the gateway's token when the client signed in
/// to the gateway by session cookie only (a worker knows no gateway session).
fn outgoing(gw: &Gateway, headers: &HeaderMap) -> HeaderMap {
    let mut h = headers.clone();
    if !h.contains_key(header::AUTHORIZATION) {
        if let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", gw.gate.store.token())) {
            h.insert(header::AUTHORIZATION, v);
        }
    }
    h
}

/// Relays to worker `i`; a worker that gives no answer is a 503 naming it
/// (and, when it refused the connection, down until its heartbeat says otherwise).
async fn relay(
    gw: &Gateway,
    i: usize,
    method: Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
    timeout: Duration,
) -> Result<Answer, Response> {
    let w = &gw.cluster.workers[i];
    let pq = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let headers = outgoing(gw, headers);
    let sent = forward(w, method, pq, &headers, body, timeout);
    let answer = tokio::select! {
        answer = sent => answer,
        () = went_down(gw, i) => {
            let msg = format!("worker {} ({}) went down while the request was in flight", w.name, w.url);
            return Err(unavailable(w, "worker_down", msg));
        }
    };
    answer.map_err(|u| {
        if u.refused && gw.cluster.mark_down(i) {
            eprintln!(
                "sandboxd: gateway: worker {} ({}) is down: {}",
                w.name, w.url, u.cause
            );
        }
        let msg = format!("worker {} ({}) is unavailable: {}", w.name, w.url, u.cause);
        unavailable(w, "worker_unavailable", msg)
    })
}

/// Resolves once worker `i` has missed its heartbeats for the down bound:
/// a frozen worker's requests fail within the bound instead of at their
/// timeout.
async fn went_down(gw: &Gateway, i: usize) {
    while gw.cluster.heard_from(i) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(super) async fn health(State(gw): GatewayState) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        name: gw.gate.store.name.clone(),
        uptime_ms: gw.gate.started.elapsed().as_millis() as u64,
    })
}

/// What every worker offers; each applies its own `--max-sandboxes`.
pub(super) async fn capabilities() -> Json<Capabilities> {
    Json(Capabilities {
        capabilities: ["exec", "files", "processes", "signals"]
            .map(String::from)
            .to_vec(),
        limits: Limits {
            max_sandboxes: None,
        },
    })
}

/// `{"workers": [{"name", "url", "state", "sandboxes", "last_seen_ms_ago"}]}`;
/// `last_seen_ms_ago` is null for a worker never seen.
pub(super) async fn cluster(State(gw): GatewayState) -> Json<Value> {
    let rows: Vec<Value> = gw
        .cluster
        .view()
        .into_iter()
        .zip(&gw.cluster.workers)
        .map(|(v, w)| {
            json!({
                "name": w.name,
                "url": w.url,
                "state": if v.live { "live" } else { "down" },
                "sandboxes": v.sandboxes,
                "last_seen_ms_ago": v.last_seen.map(|d| d.as_millis() as u64),
            })
        })
        .collect();
    Json(json!({ "workers": rows }))
}

/// Creates on the live worker with the fewest sandboxes; a name already
/// placed goes to its worker again (which answers that it exists).
pub(super) async fn create_sandbox(
    State(gw): GatewayState,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let name = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("name")?.as_str().map(String::from));
    let (i, reserved) = match name.as_deref().map(|n| gw.cluster.reserve(n)) {
        Some(Ok(i)) => (i, true),
        Some(Err(Refused::Taken(loc))) if loc.live => (loc.worker, false),
        Some(Err(Refused::Taken(loc))) => {
            let w = &gw.cluster.workers[loc.worker];
            let msg = format!(
                "sandbox {:?} already exists on worker {} ({}), which is down",
                name.unwrap_or_default(),
                w.name,
                w.url
            );
            return ApiError::new(StatusCode::CONFLICT, "already_exists", msg).into_response();
        }
        // Not a create body: the first live worker says what is wrong with it.
        Some(Err(Refused::NoneLive)) | None => match gw.cluster.live_workers().first() {
            Some(&i) if name.is_none() => (i, false),
            _ => return no_live_worker(&gw),
        },
    };
    let answer = relay(&gw, i, Method::POST, &uri, &headers, body, FORWARD_TIMEOUT).await;
    let created = answer.as_ref().ok().and_then(|a| {
        (a.status == StatusCode::CREATED)
            .then(|| serde_json::from_slice::<Sandbox>(&a.body).ok())
            .flatten()
    });
    match (created, name) {
        (Some(sb), _) => {
            let v = sandbox_json(&sb, &gw.cluster.workers[i], false);
            gw.cluster.record(i, sb);
            answer.map_or_else(|r| r, |a| a.with_json(&v))
        }
        (None, Some(n)) => {
            if reserved {
                gw.cluster.unreserve(&n, i);
            }
            answer.map_or_else(|r| r, Answer::into_response)
        }
        (None, None) => answer.map_or_else(|r| r, Answer::into_response),
    }
}

fn no_live_worker(gw: &Gateway) -> Response {
    let names: Vec<&str> = gw.cluster.workers.iter().map(|w| w.name.as_str()).collect();
    let body = json!({"error": {
        "code": "no_live_worker",
        "message": format!("no live worker to place the sandbox on (workers: {}; see GET /api/cluster)", names.join(", ")),
    }});
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}

fn worker_down(w: &Worker, name: &str) -> Response {
    let msg = format!(
        "sandbox {name:?} is on worker {} ({}), which is down: it is lost until the worker is back",
        w.name, w.url
    );
    unavailable(w, "worker_down", msg)
}

/// `GET`/`DELETE /api/sandboxes/{name}`: relayed with `worker` added; a
/// sandbox of a down worker is shown `lost` and cannot be deleted.
pub(super) async fn sandbox(
    State(gw): GatewayState,
    method: Method,
    UrlPath(name): UrlPath<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let Some(loc) = gw.cluster.locate(&name) else {
        return ApiError::no_sandbox(&name).into_response();
    };
    let w = &gw.cluster.workers[loc.worker];
    if !loc.live {
        return match (&method, loc.sandbox) {
            (&Method::GET, Some(sb)) => Json(sandbox_json(&sb, w, true)).into_response(),
            _ => worker_down(w, &name),
        };
    }
    let get = method == Method::GET;
    let sent = relay(
        &gw,
        loc.worker,
        method,
        &uri,
        &headers,
        Bytes::new(),
        FORWARD_TIMEOUT,
    );
    let answer = match (sent.await, loc.sandbox) {
        (Ok(a), _) => a,
        // It went down meanwhile: a read shows what is known.
        (Err(_), Some(sb)) if get && !gw.cluster.live(loc.worker) => {
            return Json(sandbox_json(&sb, w, true)).into_response();
        }
        (Err(r), _) => return r,
    };
    if answer.status == StatusCode::NOT_FOUND {
        gw.cluster.forget(&name, loc.worker);
    }
    if !answer.status.is_success() {
        return answer.into_response();
    }
    match serde_json::from_slice::<Sandbox>(&answer.body) {
        Ok(sb) => {
            let v = sandbox_json(&sb, w, false);
            gw.cluster.record(loc.worker, sb);
            answer.with_json(&v)
        }
        Err(_) => answer.into_response(),
    }
}

/// Everything under `/api/sandboxes/{name}/`: relayed as is. An exec may
/// run for its own `timeout_ms` (default 30 s) before the usual timeout counts.
pub(super) async fn under(
    State(gw): GatewayState,
    method: Method,
    UrlPath((name, rest)): UrlPath<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(loc) = gw.cluster.locate(&name) else {
        return ApiError::no_sandbox(&name).into_response();
    };
    if !loc.live {
        return worker_down(&gw.cluster.workers[loc.worker], &name);
    }
    let mut timeout = FORWARD_TIMEOUT;
    if rest == "exec" {
        let ms = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("timeout_ms")?.as_u64())
            .unwrap_or(30_000);
        timeout += Duration::from_millis(ms.min(600_000));
    }
    let cached = gw
        .stale_files
        .as_ref()
        .filter(|_| rest.starts_with("files/"));
    if let Some(cache) = cached {
        if method == Method::GET {
            if let Some(data) = cache.get(&name, &rest) {
                let kind = [(header::CONTENT_TYPE, "application/octet-stream")];
                return (kind, data).into_response();
            }
        }
    }
    let (read, write) = (method == Method::GET, method == Method::PUT);
    let written = write.then(|| body.clone());
    match relay(&gw, loc.worker, method, &uri, &headers, body, timeout).await {
        Ok(a) => {
            if let (Some(cache), true) = (cached, a.status.is_success()) {
                if read {
                    cache.put(&name, &rest, a.body.clone());
                } else if let Some(data) = written {
                    cache.put(&name, &rest, data);
                } else {
                    cache.forget(&name, &rest);
                }
            }
            a.into_response()
        }
        Err(r) => r,
    }
}

/// Why a worker's listing gave no page: the worker then counts as down.
#[derive(Debug, thiserror::Error)]
enum ListingError {
    /// No answer, or not a listing.
    #[error(transparent)]
    Request(#[from] reqwest::Error),
    /// An answer other than 2xx.
    #[error("its listing answered {0}")]
    Status(reqwest::StatusCode),
}

/// One page of worker `i`'s listing for `q`, with the client's credentials.
async fn list_page(
    gw: Arc<Gateway>,
    i: usize,
    q: Arc<ListQuery>,
    headers: HeaderMap,
) -> Result<SandboxList, ListingError> {
    let w = &gw.cluster.workers[i];
    let mut pairs = vec![("limit".to_string(), q.limit.to_string())];
    if !q.prefix.is_empty() {
        pairs.push(("prefix".into(), q.prefix.clone()));
    }
    if let Some(a) = &q.after {
        pairs.push(("page_token".into(), hex(a)));
    }
    for (k, v) in &q.labels {
        pairs.push(("label".into(), format!("{k}={v}")));
    }
    let mut req = w
        .client
        .get(format!("{}/api/sandboxes", w.url))
        .query(&pairs)
        .timeout(FORWARD_TIMEOUT);
    if let Some(v) = outgoing(&gw, &headers).get(header::AUTHORIZATION) {
        req = req.header(header::AUTHORIZATION, v);
    }
    let resp = req.send().await?;
    if !resp.status().is_success() {
        return Err(ListingError::Status(resp.status()));
    }
    Ok(resp.json().await?)
}

/// The live workers' listings merged by name, with the lost sandboxes of
/// the down ones; same query and page tokens as a worker's listing. A
/// worker whose listing fails counts as down for this answer.
pub(super) async fn list_sandboxes(
    State(gw): GatewayState,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let q = match parse_list_query(&uri) {
        Ok(q) => Arc::new(q),
        Err(e) => return e.into_response(),
    };
    let before = gw.cluster.seq();
    let mut set = JoinSet::new();
    for i in gw.cluster.live_workers() {
        let page = list_page(Arc::clone(&gw), i, Arc::clone(&q), headers.clone());
        set.spawn(async move { (i, page.await) });
    }
    let mut listed: BTreeMap<String, Value> = BTreeMap::new();
    let mut more = false;
    while let Some(Ok((i, page))) = set.join_next().await {
        let w = &gw.cluster.workers[i];
        match page {
            Ok(list) => {
                more |= list.next_page_token.is_some();
                gw.cluster
                    .prune(i, &q, before, &list.items, list.next_page_token.is_some());
                for sb in &list.items {
                    listed.insert(sb.name.clone(), sandbox_json(sb, w, false));
                }
            }
            Err(e) => {
                if gw.cluster.mark_down(i) {
                    eprintln!(
                        "sandboxd: gateway: worker {} ({}) is down: listing failed: {e}",
                        w.name, w.url
                    );
                }
            }
        }
    }
    for (sb, i) in gw.cluster.lost(&q) {
        let v = sandbox_json(&sb, &gw.cluster.workers[i], true);
        listed.entry(sb.name.clone()).or_insert(v);
    }
    more |= listed.len() > q.limit;
    let items: Vec<Value> = listed.into_values().take(q.limit).collect();
    let next = match items.last() {
        Some(last) if more => last["name"].as_str().map(hex),
        _ => None,
    };
    Json(json!({ "items": items, "next_page_token": next })).into_response()
}
