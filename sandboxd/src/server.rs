//! The HTTP server: routing, authentication, request accounting, handlers
//! and graceful shutdown.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path as UrlPath, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;

use crate::api::{
    is_dns_label, Capabilities, CreateSandbox, ErrorBody, ErrorDetail, ExecRequest, FileWritten,
    Handle, Health, Limits, ProcessList, Sandbox, SandboxList, SandboxState, SignalRequest,
    StartProcess, Started, SESSION_COOKIE,
};
use crate::config::{Faults, ServeArgs};
use crate::error::{ApiError, ApiResult};
use crate::procs::{parse_signal, Procs, Spec};
use crate::state::{Store, SESSION_TTL};

/// Body limit of JSON requests.
pub const JSON_BODY_LIMIT: usize = 1 << 20;
/// Body limit of file uploads.
pub const FILE_BODY_LIMIT: usize = 16 << 20;
const DEFAULT_EXEC_TIMEOUT_MS: u64 = 30_000;
const MAX_EXEC_TIMEOUT_MS: u64 = 600_000;
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;
/// How long shutdown waits after SIGTERM before SIGKILLing process groups.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Errors that stop `sandboxd serve` before it is ready.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// HOME could not be opened or initialised.
    #[error("failed to open the state directory {path}")]
    Home {
        /// The HOME given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The listen address could not be bound.
    #[error("failed to listen on {addr}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Writing the handle line failed.
    #[error("failed to print the handle on stdout")]
    Stdout(#[source] std::io::Error),
    /// Installing signal handlers failed.
    #[error("failed to install signal handlers")]
    Signals(#[source] std::io::Error),
}

struct App {
    store: Arc<Store>,
    procs: Arc<Procs>,
    faults: Faults,
    max: Option<usize>,
    started: Instant,
    window: Duration,
    requests: AtomicU64,
    deletes: AtomicU64,
}

type AppState = State<Arc<App>>;

/// Runs `sandboxd serve` until SIGTERM/SIGINT. `started` is when the process started.
pub async fn serve(args: ServeArgs, started: Instant) -> Result<(), ServeError> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(ServeError::Signals)?;
    let mut int = signal(SignalKind::interrupt()).map_err(ServeError::Signals)?;

    let faults = Faults::from_list(&args.faults);
    let home_err = |source| ServeError::Home {
        path: args.home.clone(),
        source,
    };
    let (store, deleting) = Store::open(&args.home, faults.list_lag).map_err(home_err)?;
    let procs = Procs::new(&args.home).map_err(home_err)?;
    procs.start_reaper();
    let reaped = procs.reap_leftovers().await;
    if reaped > 0 {
        eprintln!("sandboxd: killed {reaped} process group(s) left behind by a previous run");
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: args.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: args.listen,
        source,
    })?;

    let app = Arc::new(App {
        store: Arc::clone(&store),
        procs: Arc::clone(&procs),
        faults,
        max: args.max_sandboxes,
        started,
        window: args.token_window,
        requests: AtomicU64::new(0),
        deletes: AtomicU64::new(0),
    });
    for name in deleting {
        tokio::spawn(finish_delete(Arc::clone(&app), name));
    }
    let router = router(Arc::clone(&app));

    let handle = Handle {
        name: store.name.clone(),
        base_url: format!("http://{}:{}", addr.ip(), addr.port()),
        port: addr.port(),
        token: store.token().to_string(),
    };
    {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "{}",
            serde_json::to_string(&handle).expect("serialisable")
        )
        .map_err(ServeError::Stdout)?;
        out.flush().map_err(ServeError::Stdout)?;
    }
    eprintln!(
        "sandboxd: {} listening on {} (home {})",
        handle.name,
        handle.base_url,
        args.home.display()
    );

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(listener, router).with_graceful_shutdown(async move {
        let _ = stop_rx.await;
    });
    let server = tokio::spawn(async move { server.await });
    let which = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    eprintln!("sandboxd: {which}: shutting down");
    let _ = stop_tx.send(());
    procs.kill_all(SHUTDOWN_GRACE).await;
    if tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .is_err()
    {
        eprintln!("sandboxd: open connections did not finish in time; closing them");
    }
    eprintln!(
        "sandboxd: stopped ({} process groups left)",
        procs.group_count()
    );
    Ok(())
}

fn router(app: Arc<App>) -> Router {
    let json = Router::new()
        .route("/api/health", get(health))
        .route("/api/capabilities", get(capabilities))
        .route("/api/sandboxes", get(list_sandboxes).post(create_sandbox))
        .route(
            "/api/sandboxes/{name}",
            get(get_sandbox).delete(delete_sandbox),
        )
        .route("/api/sandboxes/{name}/exec", post(exec))
        .route(
            "/api/sandboxes/{name}/processes",
            get(list_processes).post(start_process),
        )
        .route("/api/sandboxes/{name}/processes/{pid}", get(get_process))
        .route(
            "/api/sandboxes/{name}/processes/{pid}/signal",
            post(signal_process),
        )
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT));
    let files = Router::new()
        .route(
            "/api/sandboxes/{name}/files/{*path}",
            get(get_file).put(put_file).delete(delete_file),
        )
        .layer(DefaultBodyLimit::max(FILE_BODY_LIMIT));
    json.merge(files)
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this route",
            )
        })
        .layer(middleware::from_fn_with_state(Arc::clone(&app), auth))
        .layer(middleware::map_response(jsonify_errors))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&app),
            log_and_count,
        ))
        .with_state(app)
}

// ---------------------------------------------------------------- middleware

/// One log line per request (never the query string: it may hold the token),
/// and the `crash-after` fault.
async fn log_and_count(State(app): AppState, req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let t0 = Instant::now();
    let has_body = req.headers().contains_key(header::TRANSFER_ENCODING)
        || req
            .headers()
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    let mut nth = None;
    if let Some(limit) = app.faults.crash_after {
        if path != "/api/health" {
            let n = app.requests.fetch_add(1, Ordering::SeqCst) + 1;
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

async fn auth(State(app): AppState, req: Request, next: Next) -> Response {
    if req.uri().path() == "/api/health" {
        return next.run(req).await;
    }
    if let Some(sid) = cookie_value(req.headers(), SESSION_COOKIE) {
        if app.store.session_valid(&sid) {
            return next.run(req).await;
        }
    }
    let Some(token) = presented_token(&req) else {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "authentication required: send `Authorization: Bearer TOKEN` (or ?token=) or the session cookie",
        )
        .into_response();
    };
    let expected = app.store.token().as_bytes();
    if !bool::from(token.as_bytes().ct_eq(expected)) {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "invalid credentials",
        )
        .into_response();
    }
    if app.started.elapsed() > app.window {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "token_expired",
            format!(
                "the token expired: it is accepted only during the first {} after start; use the session cookie `{SESSION_COOKIE}` opened by an earlier request",
                humantime::format_duration(app.window)
            ),
        )
        .into_response();
    }
    let sid = app.store.new_session();
    let mut resp = next.run(req).await;
    let cookie = format!(
        "{SESSION_COOKIE}={sid}; Max-Age={}; HttpOnly; Path=/",
        SESSION_TTL.as_secs()
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

/// Turns every non-JSON error answer (extractor rejections) into the JSON error shape.
async fn jsonify_errors(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
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

// ---------------------------------------------------------------- extractors

/// A JSON body: content type checked, size limited, unknown fields refused, every failure a JSON 4xx.
struct ApiJson<T>(T);

fn body_error(e: BytesRejection) -> ApiError {
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

// ---------------------------------------------------------------- handlers

async fn health(State(app): AppState) -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        name: app.store.name.clone(),
        uptime_ms: app.started.elapsed().as_millis() as u64,
    })
}

async fn capabilities(State(app): AppState) -> Json<Capabilities> {
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

async fn create_sandbox(
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

fn hex(s: &str) -> String {
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

async fn list_sandboxes(State(app): AppState, uri: Uri) -> ApiResult<Json<SandboxList>> {
    let pairs = Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {}", e.body_text())))?
        .0;
    let mut limit = DEFAULT_LIMIT;
    let mut after: Option<String> = None;
    let mut labels: Vec<(String, String)> = Vec::new();
    let mut prefix = String::new();
    for (k, v) in pairs {
        match k.as_str() {
            "limit" => {
                limit = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| ApiError::bad_request(format!("invalid limit {v:?}: expected an integer from 1 to {MAX_LIMIT}")))?;
            }
            "page_token" => {
                let name = unhex(&v)
                    .filter(|n| is_dns_label(n))
                    .ok_or_else(|| ApiError::bad_request(format!("invalid page_token {v:?}: pass the next_page_token of a previous answer")))?;
                after = Some(name);
            }
            "label" => {
                let (lk, lv) = v
                    .split_once('=')
                    .ok_or_else(|| ApiError::bad_request(format!("invalid label filter {v:?}: expected key=value")))?;
                labels.push((lk.to_string(), lv.to_string()));
            }
            "prefix" => prefix = v,
            "token" => {}
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {other:?}; expected one of: limit, page_token, label, prefix"
                )))
            }
        }
    }
    let view = app.store.list_view();
    let mut matching = view.iter().filter(|sb| {
        sb.name.starts_with(&prefix)
            && after.as_ref().is_none_or(|a| sb.name.as_str() > a.as_str())
            && labels.iter().all(|(k, v)| sb.labels.get(k) == Some(v))
    });
    let items: Vec<Sandbox> = matching.by_ref().take(limit).cloned().collect();
    let next_page_token = match (items.last(), matching.next()) {
        (Some(last), Some(_)) => Some(hex(&last.name)),
        _ => None,
    };
    Ok(Json(SandboxList {
        items,
        next_page_token,
    }))
}

async fn get_sandbox(
    State(app): AppState,
    UrlPath(name): UrlPath<String>,
) -> ApiResult<Json<Sandbox>> {
    app.store
        .get(&name)
        .map(Json)
        .ok_or_else(|| ApiError::no_sandbox(&name))
}

async fn finish_delete(app: Arc<App>, name: String) {
    if let Some(d) = app.faults.delete_delay {
        tokio::time::sleep(d).await;
    }
    app.procs.kill_sandbox(&name).await;
    app.store.remove(&name);
    // A process started while the delete was in flight goes too.
    app.procs.kill_sandbox(&name).await;
    eprintln!("sandboxd: sandbox {name} deleted");
}

async fn delete_sandbox(
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
fn ready(app: &App, name: &str) -> ApiResult<Sandbox> {
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

async fn exec(
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

async fn start_process(
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

async fn list_processes(
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

async fn get_process(
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

async fn signal_process(
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

// ---------------------------------------------------------------- files

/// Resolves `raw` inside `root`, refusing anything that could leave it.
pub(crate) fn confine(root: &Path, raw: &str) -> ApiResult<PathBuf> {
    if raw.is_empty() {
        return Err(ApiError::path_escape("empty path"));
    }
    if raw.starts_with('/') {
        return Err(ApiError::path_escape(format!(
            "absolute path {raw:?} refused: paths are relative to the sandbox"
        )));
    }
    if raw.contains('\0') {
        return Err(ApiError::bad_request("path contains a NUL byte"));
    }
    let mut comps = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(ApiError::path_escape(format!(
                    "path {raw:?} refused: `..` is not allowed"
                )))
            }
            c => comps.push(c),
        }
    }
    if comps.is_empty() {
        return Err(ApiError::path_escape(format!(
            "path {raw:?} names the sandbox root, not a file"
        )));
    }
    let root = root.canonicalize()?;
    let mut cur = root.clone();
    let mut rest = comps.into_iter();
    for c in rest.by_ref() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => match cur.canonicalize() {
                Ok(target) if target.starts_with(&root) => cur = target,
                _ => {
                    return Err(ApiError::path_escape(format!(
                        "path {raw:?} refused: a symlink leads outside the sandbox"
                    )))
                }
            },
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOTDIR) => {
                return Err(ApiError::bad_request(format!(
                    "path {raw:?}: a parent is not a directory"
                )))
            }
            Err(e) => return Err(e.into()),
        }
    }
    cur.extend(rest);
    Ok(cur)
}

fn file_target(app: &App, name: &str, raw: &str) -> ApiResult<PathBuf> {
    ready(app, name)?;
    confine(&app.store.root(name), raw)
}

async fn put_file(
    State(app): AppState,
    UrlPath((name, raw)): UrlPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let target = file_target(&app, &name, &raw)?;
    let body = body.map_err(body_error)?;
    let existed = match tokio::fs::metadata(&target).await {
        Ok(m) if m.is_dir() => {
            return Err(ApiError::bad_request(format!("{raw:?} is a directory")))
        }
        Ok(_) => true,
        Err(_) => false,
    };
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(|e| {
            ApiError::bad_request(format!(
                "cannot create the parent directories of {raw:?}: {e}"
            ))
        })?;
    }
    tokio::fs::write(&target, &body).await?;
    if existed {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Ok((
            StatusCode::CREATED,
            Json(FileWritten {
                path: raw,
                size: body.len() as u64,
            }),
        )
            .into_response())
    }
}

async fn get_file(
    State(app): AppState,
    UrlPath((name, raw)): UrlPath<(String, String)>,
) -> ApiResult<Response> {
    let target = file_target(&app, &name, &raw)?;
    match tokio::fs::metadata(&target).await {
        Ok(m) if m.is_dir() => {
            return Err(ApiError::bad_request(format!("{raw:?} is a directory")))
        }
        Ok(_) => {}
        Err(_) => {
            return Err(ApiError::not_found(format!(
                "file {raw:?} not found in sandbox {name:?}"
            )))
        }
    }
    let data = tokio::fs::read(&target).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}

async fn delete_file(
    State(app): AppState,
    UrlPath((name, raw)): UrlPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let target = file_target(&app, &name, &raw)?;
    match tokio::fs::symlink_metadata(&target).await {
        Ok(m) if m.is_dir() => tokio::fs::remove_dir_all(&target).await?,
        Ok(_) => tokio::fs::remove_file(&target).await?,
        Err(_) => {
            return Err(ApiError::not_found(format!(
                "file {raw:?} not found in sandbox {name:?}"
            )))
        }
    }
    Ok(StatusCode::NO_CONTENT)
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

    #[test]
    fn confinement() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("in")).unwrap();
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "out/passwd",
            "out",
            ".",
        ] {
            let e = confine(&root, bad).unwrap_err();
            assert_eq!(e.code, "path_escape", "{bad}");
        }
        let root_c = root.canonicalize().unwrap();
        assert_eq!(confine(&root, "a/b.txt").unwrap(), root_c.join("a/b.txt"));
        assert_eq!(confine(&root, "in/f").unwrap(), root_c.join("sub/f"));
        assert_eq!(confine(&root, "./sub//f").unwrap(), root_c.join("sub/f"));
    }
}
