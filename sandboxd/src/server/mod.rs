//! The HTTP server: startup, routing and graceful shutdown. What runs on
//! every request is in [`middleware`], request bodies are read by
//! [`extract`], the JSON endpoints are [`handlers`], the file endpoints
//! [`files`] and the web UI [`ui`].

pub(crate) mod conn;
mod extract;
mod files;
pub(crate) mod handlers;
pub(crate) mod middleware;
mod records;
mod ui;

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::middleware as mw;
use axum::routing::{get, post};
use axum::Router;

use crate::api::Handle;
use crate::config::{Faults, Role, ServeArgs};
use crate::error::ApiError;
use crate::procs::Procs;
use crate::state::Store;

use files::{delete_file, get_file, list_files, put_file};
use handlers::{
    capabilities, create_sandbox, delete_sandbox, exec, finish_delete, get_process, get_sandbox,
    health, list_processes, list_sandboxes, signal_process, start_process,
};
use middleware::{auth, jsonify_errors, log_and_count};

/// Body limit of JSON requests.
pub const JSON_BODY_LIMIT: usize = 1 << 20;
/// Body limit of file uploads.
pub const FILE_BODY_LIMIT: usize = 16 << 20;
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
    pub(crate) async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

/// Shared by every request: the state, the process registry and the counters of the faults.
struct App {
    store: Arc<Store>,
    procs: Arc<Procs>,
    faults: Faults,
    max: Option<usize>,
    started: Instant,
    window: Duration,
    requests: AtomicU64,
    deletes: AtomicU64,
    /// Deletes of an existing sandbox, for `delete-miss`.
    missed_deletes: AtomicU64,
}

/// What every handler and middleware is given.
type AppState = State<Arc<App>>;

/// Runs `sandboxd serve` until SIGTERM/SIGINT. `started` is when the process started.
pub async fn serve(args: ServeArgs, started: Instant) -> Result<(), ServeError> {
    if args.role == Role::Gateway {
        return crate::gateway::serve(args, started).await;
    }
    if !args.workers.is_empty() {
        return Err(ServeError::Usage(
            "--worker is for --role gateway; a worker holds its own sandboxes".into(),
        ));
    }
    let mut stop = StopSignals::install()?;
    let faults = Faults::from_list(&args.faults);
    let (store, deleting, procs) = open_home(&args, &faults).await?;
    let (listener, addr) = bind(args.listen).await?;

    let app = Arc::new(App {
        store: Arc::clone(&store),
        procs: Arc::clone(&procs),
        faults,
        max: args.max_sandboxes,
        started,
        window: args.token_window,
        requests: AtomicU64::new(0),
        deletes: AtomicU64::new(0),
        missed_deletes: AtomicU64::new(0),
    });
    for name in deleting {
        tokio::spawn(finish_delete(Arc::clone(&app), name));
    }
    let router = router(Arc::clone(&app));
    print_handle(&store, addr, &args)?;

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(conn::serve_connections(
        listener,
        router,
        args.header_timeout,
        async move {
            let _ = stop_rx.await;
        },
    ));
    let which = stop.recv().await;
    eprintln!("sandboxd: {which}: shutting down");
    let _ = stop_tx.send(());
    shut_down(&procs, server).await;
    Ok(())
}

/// Opens the state in HOME and the process registry, whose reaper it
/// starts after killing what a previous run left: the store, the sandboxes
/// whose delete is to finish, and the registry.
async fn open_home(
    args: &ServeArgs,
    faults: &Faults,
) -> Result<(Arc<Store>, Vec<String>, Arc<Procs>), ServeError> {
    let home_err = |source| ServeError::Home {
        path: args.home.clone(),
        source,
    };
    let token = token_from_env(args)?;
    let (store, deleting) = Store::open(&args.home, faults.list_lag, token).map_err(home_err)?;
    let procs = Procs::new(&args.home, &store.name, !args.no_cgroup).map_err(home_err)?;
    eprintln!(
        "sandboxd: sandbox processes are tracked by {}",
        procs.ownership()
    );
    procs.start_reaper();
    let reaped = procs.reap_leftovers().await;
    if reaped > 0 {
        eprintln!("sandboxd: killed {reaped} process group(s) left behind by a previous run");
    }
    Ok((store, deleting, procs))
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

/// Kills every sandbox process, then lets open connections finish for a
/// while.
async fn shut_down(procs: &Procs, server: tokio::task::JoinHandle<()>) {
    let left = procs.kill_all(SHUTDOWN_GRACE).await;
    if !left.is_empty() {
        eprintln!(
            "sandboxd: error: {} sandbox process(es) survived SIGKILL: {left:?}",
            left.len()
        );
    }
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
}

fn router(app: Arc<App>) -> Router {
    let json = Router::new()
        .route("/", get(ui::index))
        .route("/ui/app.js", get(ui::script))
        .route("/ui/app.css", get(ui::style))
        .route("/ui/sign-in", post(ui::sign_in))
        .route("/api/health", get(health))
        .route("/api/capabilities", get(capabilities))
        .route("/api/sandboxes", get(list_sandboxes).post(create_sandbox))
        .route(
            "/api/sandboxes/{name}",
            get(get_sandbox).delete(delete_sandbox),
        )
        .route("/api/sandboxes/{name}/exec", post(exec))
        .route("/api/sandboxes/{name}/files", get(list_files))
        .route(
            "/api/sandboxes/{name}/processes",
            get(list_processes).post(start_process),
        )
        .route("/api/sandboxes/{name}/processes/{pid}", get(get_process))
        .route(
            "/api/sandboxes/{name}/processes/{pid}/signal",
            post(signal_process),
        )
        .route(
            "/api/records",
            get(records::list_records).post(records::create_record),
        )
        .route("/api/records/lookup", post(records::lookup_record))
        .route("/api/records/delete", post(records::delete_record_by_body))
        .route(
            "/api/records/{id}",
            get(records::get_record).delete(records::delete_record),
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
        .layer(mw::from_fn_with_state(Arc::clone(&app), auth))
        .layer(mw::map_response(jsonify_errors))
        .layer(mw::from_fn_with_state(Arc::clone(&app), log_and_count))
        .with_state(app)
}
