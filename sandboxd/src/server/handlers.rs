//! The JSON endpoints: health, capabilities, sandboxes, exec and
//! background processes.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::{StatusCode, Uri};
use axum::Json;

use super::extract::ApiJson;
use super::{App, AppState};
use crate::api::{
    is_dns_label, Capabilities, CreateSandbox, ExecRequest, Health, Limits, ProcessList, Sandbox,
    SandboxList, SandboxState, SignalRequest, StartProcess, Started,
};
use crate::error::{ApiError, ApiResult};
use crate::listing::{hex, parse_list_query};
use crate::procs::{parse_signal, Spec};

const DEFAULT_EXEC_TIMEOUT_MS: u64 = 30_000;
const MAX_EXEC_TIMEOUT_MS: u64 = 600_000;

pub(super) async fn health(State(app): AppState) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        name: app.gate.store.name.clone(),
        uptime_ms: app.gate.started.elapsed().as_millis() as u64,
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
    let sb = app.gate.store.create(req, app.max)?;
    Ok((StatusCode::CREATED, Json(sb)))
}

pub(super) async fn list_sandboxes(State(app): AppState, uri: Uri) -> ApiResult<Json<SandboxList>> {
    let q = parse_list_query(&uri)?;
    let view = app.gate.store.list_view();
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
    app.gate
        .store
        .get(&name)
        .map(Json)
        .ok_or_else(|| ApiError::no_sandbox(&name))
}

pub(super) async fn finish_delete(app: Arc<App>, name: String) {
    if let Some(d) = app.gate.faults.delete_delay {
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
    if app.gate.faults.keep_dirs_on_delete {
        eprintln!("sandboxd: fault keep-dirs-on-delete: forgetting {name}, keeping its directory");
        app.gate.store.forget(&name);
    } else {
        app.gate.store.remove(&name);
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
    if n < app.gate.faults.delete_fail {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!(
                "delete temporarily unavailable (fault delete-fail: failure {} of {})",
                n + 1,
                app.gate.faults.delete_fail
            ),
        ));
    }
    // Counted after the failures: a delete that answered 503 read nothing.
    if app.gate.store.get(&name).is_some()
        && app.missed_deletes.fetch_add(1, Ordering::SeqCst) < app.gate.faults.delete_miss
    {
        return Err(ApiError::no_sandbox(&name));
    }
    if app.gate.store.mark_deleting(&name)? {
        tokio::spawn(finish_delete(Arc::clone(&app), name.clone()));
    }
    let sb = app
        .gate
        .store
        .get(&name)
        .ok_or_else(|| ApiError::no_sandbox(&name))?;
    Ok((StatusCode::ACCEPTED, Json(sb)))
}

/// The sandbox, if it exists and is not being deleted.
pub(super) fn ready(app: &App, name: &str) -> ApiResult<Sandbox> {
    let sb = app
        .gate
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
    let root = app.gate.store.root(&name);
    let empty = BTreeMap::new();
    // The `drop-exec-env` fault reproduces a product bug: the per-call env is ignored.
    let call_env = if app.gate.faults.drop_exec_env {
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
    let root = app.gate.store.root(&name);
    let spec = Spec {
        sandbox: &name,
        root: &root,
        argv: &req.argv,
        env: vec![&sb.env, &req.env],
    };
    let pid = app.procs.start(spec, &app.gate.store.logs(&name))?;
    Ok((StatusCode::CREATED, Json(Started { pid })))
}

pub(super) async fn list_processes(
    State(app): AppState,
    UrlPath(name): UrlPath<String>,
) -> ApiResult<Json<ProcessList>> {
    app.gate
        .store
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
    app.gate
        .store
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
    app.gate
        .store
        .get(&name)
        .ok_or_else(|| ApiError::no_sandbox(&name))?;
    let pid = parse_pid(&pid)?;
    let sig = parse_signal(&req.signal)?;
    app.procs.signal(&name, pid, sig)?;
    Ok(StatusCode::ACCEPTED)
}
