//! What a worker ([`crate::server`]) and a gateway ([`crate::gateway`])
//! serve alike: the errors that stop a start, the stop signals, the token
//! from the environment, the listener and the handle line, the accept loop
//! ([`conn`]), what runs around every request ([`middleware`]) and the end
//! of every router ([`finish`]). A role builds its own state and routes and
//! hands them here; nothing here knows which role it serves.

pub(crate) mod conn;
pub(crate) mod middleware;

use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::middleware as mw;
use axum::Router;

use crate::api::Handle;
use crate::config::{Faults, ServeArgs};
use crate::error::ApiError;
use crate::state::Store;

/// Body limit of JSON requests.
pub const JSON_BODY_LIMIT: usize = 1 << 20;
/// Body limit of file uploads.
pub const FILE_BODY_LIMIT: usize = 16 << 20;
/// How long a stopping server lets open connections finish their request.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors that stop `sandboxd serve` before it is ready.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// HOME could not be opened or initialised.
    #[error("failed to open the state directory {path}")]
    Home {
        /// The HOME given.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The listen address could not be bound.
    #[error("failed to listen on {addr}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Writing the handle line failed.
    #[error("failed to print the handle on stdout")]
    Stdout(#[source] std::io::Error),
    /// Installing signal handlers failed.
    #[error("failed to install signal handlers")]
    Signals(#[source] std::io::Error),
    /// `--token-env NAME` names a variable that holds no usable token.
    #[error("--token-env {var}: the environment variable {var} {problem}")]
    TokenEnv {
        /// The variable's name (never its value).
        var: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// `--role` and `--worker` do not fit together.
    #[error("{0}")]
    Usage(String),
    /// A gateway's HTTP client for its workers could not be made.
    #[error("failed to make an HTTP client")]
    Client(#[source] reqwest::Error),
}

/// What every request of either role passes through: identity (token) and
/// sessions, the fault switches, the token window and the request count.
/// The middleware takes it as its state; each role holds it in its own.
pub(crate) struct Gate {
    /// Identity (token) and sessions.
    pub(crate) store: Arc<Store>,
    /// The fault switches.
    pub(crate) faults: Faults,
    /// When the process started (the token window counts from there).
    pub(crate) started: Instant,
    /// `--token-window`.
    pub(crate) window: Duration,
    /// Requests served, for `crash-after`.
    pub(crate) requests: AtomicU64,
}

impl Gate {
    /// A gate that has counted no request yet.
    pub(crate) fn new(
        store: Arc<Store>,
        faults: Faults,
        started: Instant,
        window: Duration,
    ) -> Self {
        Self {
            store,
            faults,
            started,
            window,
            requests: AtomicU64::new(0),
        }
    }
}

/// The token `--token-env` names, if given: `None` keeps HOME's own.
pub(crate) fn token_from_env(args: &ServeArgs) -> Result<Option<String>, ServeError> {
    let Some(var) = &args.token_env else {
        return Ok(None);
    };
    let problem = match std::env::var_os(var) {
        None => "is not set",
        Some(v) if v.is_empty() => "is empty",
        Some(v) => match v.into_string() {
            // It travels in `Authorization: Bearer ...` headers.
            Ok(t) if t.bytes().all(|b| b.is_ascii_graphic()) => return Ok(Some(t)),
            _ => "holds characters other than printable ASCII without spaces",
        },
    };
    Err(ServeError::TokenEnv {
        var: var.clone(),
        problem,
    })
}

/// SIGTERM and SIGINT, installed before the server is ready.
pub(crate) struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Installs the handlers.
    pub(crate) fn install() -> Result<Self, ServeError> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Self {
            term: signal(SignalKind::terminate()).map_err(ServeError::Signals)?,
            int: signal(SignalKind::interrupt()).map_err(ServeError::Signals)?,
        })
    }

    /// Waits for either; answers its name.
    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// Listens on `listen`: the listener and the address it got.
pub(crate) async fn bind(
    listen: std::net::SocketAddr,
) -> Result<(tokio::net::TcpListener, std::net::SocketAddr), ServeError> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: listen,
        source,
    })?;
    Ok((listener, addr))
}

/// Prints the handle line on stdout (what a launcher waits for), then
/// where the server listens on stderr.
pub(crate) fn print_handle(
    store: &Store,
    addr: std::net::SocketAddr,
    args: &ServeArgs,
) -> Result<(), ServeError> {
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
    Ok(())
}

/// The end of every router: the JSON answers for no such route and a
/// method the route does not take, then authentication, the JSON shape of
/// every error and the log line, all with `gate` as their state.
pub(crate) fn finish(routes: Router, gate: Arc<Gate>) -> Router {
    routes
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this route",
            )
        })
        .layer(mw::from_fn_with_state(Arc::clone(&gate), middleware::auth))
        .layer(mw::map_response(middleware::jsonify_errors))
        .layer(mw::from_fn_with_state(gate, middleware::log_and_count))
}

/// Serves `router` on `listener` until SIGTERM or SIGINT; then stops
/// accepting, runs `on_stop` (a worker kills its sandbox processes there),
/// and lets open connections finish their request for a while.
pub(crate) async fn serve_until_stopped(
    listener: tokio::net::TcpListener,
    router: Router,
    header_timeout: Duration,
    mut stop: StopSignals,
    on_stop: impl Future<Output = ()>,
) {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(conn::serve_connections(
        listener,
        router,
        header_timeout,
        async move {
            let _ = stop_rx.await;
        },
    ));
    let which = stop.recv().await;
    eprintln!("sandboxd: {which}: shutting down");
    let _ = stop_tx.send(());
    on_stop.await;
    if tokio::time::timeout(DRAIN_TIMEOUT, server).await.is_err() {
        eprintln!("sandboxd: open connections did not finish in time; closing them");
    }
}
