//! The JSON endpoints: health, capabilities, sandboxes, exec and
//! background processes.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{StatusCode, Uri};
use axum::Json;

use super::extract::ApiJson;
use super::{App, AppState};
use crate::api::{
    is_dns_label, Capabilities, CreateSandbox, ExecRequest, Health, Limits, ProcessList, Sandbox,
    SandboxList, SandboxState, SignalRequest, StartProcess, Started,
};
use crate::error::{ApiError, ApiResult};
use crate::procs::{parse_signal, Spec};

const DEFAULT_EXEC_TIMEOUT_MS: u64 = 30_000;
const MAX_EXEC_TIMEOUT_MS: u64 = 600_000;
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;

pub(super) async fn health(State(app): AppState) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        name: app.store.name.clone(),
        uptime_ms: app.started.elapsed().as_millis() as u64,
    })
}

pub(super) async fn capabilities(State(app): AppState) -> Json<Capabilities> {
    Json(Capabilities {
        capabilities: ["exec", "files", "processes", "signals"]
            .map(String::from)
            .to_vec(),
        limits: Limits {
            max_sandboxes: app.max,
        },
    })
}

fn validate_labels(labels: &BTreeMap<String, String>) -> ApiResult<()> {
    if labels.len() > 64 {
        return Err(ApiError::bad_request("at most 64 labels"));
    }
    for (k, v) in labels {
        let key_ok = !k.is_empty()
            && k.len() <= 63
            && k.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"._-/".contains(&c))
            && k.as_bytes()[0].is_ascii_alphanumeric();
        if !key_ok {
            return Err(ApiError::bad_request(format!(
                "invalid label key {k:?}: 1-63 characters of A-Z a-z 0-9 . _ - /, starting with a letter or digit"
            )));
        }
        if v.len() > 253 || v.chars().any(char::is_control) || v.contains('=') {
            return Err(ApiError::bad_request(format!(
                "invalid label value {v:?} for {k:?}: at most 253 characters, no control characters, no `=`"
            )));
        }
    }
    Ok(())
}

fn validate_env(env: &BTreeMap<String, String>) -> ApiResult<()> {
    if env.len() > 256 {
        return Err(ApiError::bad_request("at most 256 environment variables"));
    }
    for (k, v) in env {
        let ok = !k.is_empty()
            && k.len() <= 256
            && k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
            && !k.as_bytes()[0].is_ascii_digit();
        if !ok {
            return Err(ApiError::bad_request(format!(
                "invalid environment variable name {k:?}: expected [A-Za-z_][A-Za-z0-9_]*"
            )));
        }
        if v.contains('\0') || v.len() > 32 * 1024 {
            return Err(ApiError::bad_request(format!(
                "invalid value for environment variable {k:?}: no NUL, at most 32 KiB"
            )));
        }
    }
    Ok(())
}

pub(super) async fn create_sandbox(
    State(app): AppState,
    ApiJson(req): ApiJson<CreateSandbox>,
) -> ApiResult<(StatusCode, Json<Sandbox>)> {
    if !is_dns_label(&req.name) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_name",
            format!("invalid sandbox name {:?}: expected a DNS label (1-63 of a-z, 0-9, '-', not starting or ending with '-')", req.name),
        ));
    }
    validate_labels(&req.labels)?;
    validate_env(&req.env)?;
    let sb = app.store.create(req, app.max)?;
    Ok((StatusCode::CREATED, Json(sb)))
}

pub(crate) fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if s.len() & 1 == 1 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The query of `GET /api/sandboxes`, checked: a gateway reads it the same way.
pub(crate) struct ListQuery {
    /// Page size, 1 to 1000.
    pub(crate) limit: usize,
    /// Names after this one (from `page_token`).
    pub(crate) after: Option<String>,
    /// `label=key=value` filters, all of which must match.
    pub(crate) labels: Vec<(String, String)>,
    /// Names starting with this.
    pub(crate) prefix: String,
}

impl ListQuery {
    /// Whether `sb` belongs in the listing (page position aside from `after`).
    pub(crate) fn matches(&self, sb: &Sandbox) -> bool {
        sb.name.starts_with(&self.prefix)
            && self
                .after
                .as_ref()
                .is_none_or(|a| sb.name.as_str() > a.as_str())
            && self.labels.iter().all(|(k, v)| sb.labels.get(k) == Some(v))
    }
}

pub(crate) fn parse_list_query(uri: &Uri) -> ApiResult<ListQuery> {
    let pairs = Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {}", e.body_text())))?
        .0;
    let mut q = ListQuery {
        limit: DEFAULT_LIMIT,
        after: None,
        labels: Vec::new(),
        prefix: String::new(),
    };
    for (k, v) in pairs {
        match k.as_str() {
            "limit" => {
                q.limit = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| ApiError::bad_request(format!("invalid limit {v:?}: expected an integer from 1 to {MAX_LIMIT}")))?;
            }
            "page_token" => {
                let name = unhex(&v)
                    .filter(|n| is_dns_label(n))
                    .ok_or_else(|| ApiError::bad_request(format!("invalid page_token {v:?}: pass the next_page_token of a previous answer")))?;
                q.after = Some(name);
            }
            "label" => {
                let (lk, lv) = v
                    .split_once('=')
                    .ok_or_else(|| ApiError::bad_request(format!("invalid label filter {v:?}: expected key=value")))?;
                q.labels.push((lk.to_string(), lv.to_string()));
            }
            "prefix" => q.prefix = v,
            "token" => {}
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {other:?}; expected one of: limit, page_token, label, prefix"
                )))
            }
        }
    }
    Ok(q)
}

pub(super) async fn list_sandboxes(State(app): AppState, uri: Uri) -> ApiResult<Json<SandboxList>> {
    let q = parse_list_query(&uri)?;
    let view = app.store.list_view();
    let mut matching = view.iter().filter(|sb| q.matches(sb));
    let items: Vec<Sandbox> = matching.by_ref().take(q.limit).cloned().collect();
    let next_page_token = match (items.last(), matching.next()) {
        (Some(last), Some(_)) => Some(hex(&last.name)),
        _ => None,
    };
    Ok(Json(SandboxList {
        items,
        next_page_token,
    }))
}

pub(super) async fn get_sandbox(
    State(app): AppState,
    UrlPath(name): UrlPath<String>,
) -> ApiResult<Json<Sandbox>> {
    app.store
        .get(&name)
        .map(Json)
        .ok_or_else(|| ApiError::no_sandbox(&name))
}

pub(super) async fn finish_delete(app: Arc<App>, name: String) {
    if let Some(d) = app.faults.delete_delay {
        tokio::time::sleep(d).await;
    }
    let left = app.procs.kill_sandbox(&name).await;
    if !left.is_empty() {
        // Not gone means not deleted: the sandbox stays `deleting` for all to see.
        eprintln!(
            "sandboxd: error: {} process(es) of sandbox {name} survived SIGKILL ({left:?}); it stays deleting",
            left.len()
        );
        return;
    }
    if app.faults.keep_dirs_on_delete {
        eprintln!("sandboxd: fault keep-dirs-on-delete: forgetting {name}, keeping its directory");
        app.store.forget(&name);
    } else {
        app.store.remove(&name);
    }
    // A process started while the delete was in flight goes too.
    let left = app.procs.kill_sandbox(&name).await;
    if !left.is_empty() {
        eprintln!(
            "sandboxd: error: {} process(es) started during the delete of {name} survived SIGKILL: {left:?}",
            left.len()
        );
    }
    eprintln!("sandboxd: sandbox {name} deleted");
}

pub(super) async fn delete_sandbox(
    State(app): AppState,
    UrlPath(name): UrlPath<String>,
) -> ApiResult<(StatusCode, Json<Sandbox>)> {
    let n = app.deletes.fetch_add(1, Ordering::SeqCst);
    if n < app.faults.delete_fail {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!(
                "delete temporarily unavailable (fault delete-fail: failure {} of {})",
                n + 1,
                app.faults.delete_fail
            ),
        ));
    }
    // Counted after the failures: a delete that answered 503 read nothing.
    if app.store.get(&name).is_some()
        && app.missed_deletes.fetch_add(1, Ordering::SeqCst) < app.faults.delete_miss
    {
        return Err(ApiError::no_sandbox(&name));
    }
    if app.store.mark_deleting(&name)? {
        tokio::spawn(finish_delete(Arc::clone(&app), name.clone()));
    }
    let sb = app
        .store
        .get(&name)
        .ok_or_else(|| ApiError::no_sandbox(&name))?;
    Ok((StatusCode::ACCEPTED, Json(sb)))
}

/// The sandbox, if it exists and is not being deleted.
pub(super) fn ready(app: &App, name: &str) -> ApiResult<Sandbox> {
    let sb = app
        .store
        .get(name)
        .ok_or_else(|| ApiError::no_sandbox(name))?;
    if sb.state != SandboxState::Ready {
        return Err(ApiError::conflict(format!(
            "sandbox {name:?} is being deleted"
        )));
    }
    Ok(sb)
}

pub(super) async fn exec(
    State(app): AppState,
    UrlPath(name): UrlPath<String>,
    ApiJson(req): ApiJson<ExecRequest>,
) -> ApiResult<Json<crate::api::ExecResult>> {
    let sb = ready(&app, &name)?;
    let timeout_ms = req.timeout_ms.unwrap_or(DEFAULT_EXEC_TIMEOUT_MS);
    if !(1..=MAX_EXEC_TIMEOUT_MS).contains(&timeout_ms) {
        return Err(ApiError::bad_request(format!(
            "invalid timeout_ms {timeout_ms}: expected 1 to {MAX_EXEC_TIMEOUT_MS}"
        )));
    }
    validate_env(&req.env)?;
    let root = app.store.root(&name);
    let empty = BTreeMap::new();
    // The `drop-exec-env` fault reproduces a product bug: the per-call env is ignored.
    let call_env = if app.faults.drop_exec_env {
        &empty
    } else {
        &req.env
    };
    let spec = Spec {
        sandbox: &name,
        root: &root,
        argv: &req.argv,
        env: vec![&sb.env, call_env],
    };
    let res = app
        .procs
        .exec(spec, Duration::from_millis(timeout_ms))
        .await?;
    Ok(Json(res))
}

pub(super) async fn start_process(
    State(app): AppState,
    UrlPath(name): UrlPath<String>,
    ApiJson(req): ApiJson<StartProcess>,
) -> ApiResult<(StatusCode, Json<Started>)> {
    let sb = ready(&app, &name)?;
    validate_env(&req.env)?;
    let root = app.store.root(&name);
    let spec = Spec {
        sandbox: &name,
        root: &root,
        argv: &req.argv,
        env: vec![&sb.env, &req.env],
    };
    let pid = app.procs.start(spec, &app.store.logs(&name))?;
    Ok((StatusCode::CREATED, Json(Started { pid })))
}

pub(super) async fn list_processes(
    State(app): AppState,
    UrlPath(name): UrlPath<String>,
) -> ApiResult<Json<ProcessList>> {
    app.store
        .get(&name)
        .ok_or_else(|| ApiError::no_sandbox(&name))?;
    Ok(Json(ProcessList {
        items: app.procs.list(&name),
    }))
}

fn parse_pid(s: &str) -> ApiResult<i32> {
    s.parse::<i32>()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| ApiError::bad_request(format!("invalid pid {s:?}")))
}

pub(super) async fn get_process(
    State(app): AppState,
    UrlPath((name, pid)): UrlPath<(String, String)>,
) -> ApiResult<Json<crate::api::ProcessInfo>> {
    app.store
        .get(&name)
        .ok_or_else(|| ApiError::no_sandbox(&name))?;
    let pid = parse_pid(&pid)?;
    app.procs
        .get(&name, pid)
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("process {pid} not found in sandbox {name:?}")))
}

pub(super) async fn signal_process(
    State(app): AppState,
    UrlPath((name, pid)): UrlPath<(String, String)>,
    ApiJson(req): ApiJson<SignalRequest>,
) -> ApiResult<StatusCode> {
    app.store
        .get(&name)
        .ok_or_else(|| ApiError::no_sandbox(&name))?;
    let pid = parse_pid(&pid)?;
    let sig = parse_signal(&req.signal)?;
    app.procs.signal(&name, pid, sig)?;
    Ok(StatusCode::ACCEPTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip() {
        assert_eq!(unhex(&hex("ct-abc-01")).as_deref(), Some("ct-abc-01"));
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("abc"), None);
    }
}
