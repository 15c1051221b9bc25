//! `sandboxd serve` as a worker (the default role): it holds sandboxes.
//! Startup, routing and shutdown of the worker; what it shares with a
//! gateway (the accept loop, what runs on every request, the end of the
//! router) is [`crate::skeleton`]. Request bodies are read by [`extract`],
//! the JSON endpoints are [`handlers`], the file endpoints [`files`] and
//! the web UI [`ui`].

mod extract;
mod files;
mod handlers;
mod records;
mod ui;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{get, post};
use axum::Router;

use crate::config::{Faults, ServeArgs};
use crate::procs::Procs;
use crate::skeleton::{
    bind, print_handle, serve_until_stopped, token_from_env, Gate, ServeError, StopSignals,
    FILE_BODY_LIMIT, JSON_BODY_LIMIT,
};
use crate::state::Store;

use files::{delete_file, get_file, list_files, put_file};
use handlers::{
    capabilities, create_sandbox, delete_sandbox, exec, finish_delete, get_process, get_sandbox,
    health, list_processes, list_sandboxes, signal_process, start_process,
};

/// How long shutdown waits after SIGTERM before SIGKILLing process groups.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Shared by every request of a worker: what every request passes (the
/// state, the faults), the process registry and the counters of the faults.
struct App {
    gate: Arc<Gate>,
    procs: Arc<Procs>,
    max: Option<usize>,
    deletes: AtomicU64,
    /// Deletes of an existing sandbox, for `delete-miss`.
    missed_deletes: AtomicU64,
}

/// What every handler and middleware is given.
type AppState = State<Arc<App>>;

/// Runs a worker until SIGTERM/SIGINT. `started` is when the process started.
pub(crate) async fn serve(args: ServeArgs, started: Instant) -> Result<(), ServeError> {
    if !args.workers.is_empty() {
        return Err(ServeError::Usage(
            "--worker is for --role gateway; a worker holds its own sandboxes".into(),
        ));
    }
    let stop = StopSignals::install()?;
    let faults = Faults::from_list(&args.faults);
    let (store, deleting, procs) = open_home(&args, &faults).await?;
    let (listener, addr) = bind(args.listen).await?;

    let app = Arc::new(App {
        gate: Arc::new(Gate::new(
            Arc::clone(&store),
            faults,
            started,
            args.token_window,
        )),
        procs: Arc::clone(&procs),
        max: args.max_sandboxes,
        deletes: AtomicU64::new(0),
        missed_deletes: AtomicU64::new(0),
    });
    for name in deleting {
        tokio::spawn(finish_delete(Arc::clone(&app), name));
    }
    let router = router(Arc::clone(&app));
    print_handle(&store, addr, &args)?;
    serve_until_stopped(
        listener,
        router,
        args.header_timeout,
        stop,
        kill_all(&procs),
    )
    .await;
    eprintln!(
        "sandboxd: stopped ({} process groups left)",
        procs.group_count()
    );
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

/// Kills every sandbox process once the server stops accepting.
async fn kill_all(procs: &Procs) {
    let left = procs.kill_all(SHUTDOWN_GRACE).await;
    if !left.is_empty() {
        eprintln!(
            "sandboxd: error: {} sandbox process(es) survived SIGKILL: {left:?}",
            left.len()
        );
    }
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
    let gate = Arc::clone(&app.gate);
    crate::skeleton::finish(json.merge(files).with_state(app), gate)
}
