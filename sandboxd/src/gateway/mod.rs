//! `sandboxd serve --role gateway`: a reference cluster's front door.
//!
//! A gateway holds no sandboxes. It serves the sandbox API by forwarding
//! each request to the worker that holds the sandbox ([`forward`]), places
//! each create on the live worker with the fewest sandboxes and remembers
//! where every name lives ([`placement`]), and probes every worker's
//! health to tell live workers from down ones ([`heartbeat`]). The
//! sandboxes of a down worker are shown `lost` until it answers again and
//! the gateway has re-read its listing. Authentication is the worker's
//! own middleware; the client's `Authorization` header is forwarded as
//! sent, so every node must accept the same token (`--token-env`).

mod forward;
mod handlers;
mod heartbeat;
mod placement;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get};
use axum::Router;

use crate::config::{Faults, ServeArgs, WorkerSpec};
use crate::skeleton::{
    bind, print_handle, serve_until_stopped, token_from_env, Gate, ServeError, StopSignals,
    FILE_BODY_LIMIT,
};
use crate::state::Store;
use placement::{Cluster, Worker};

/// How long a starting gateway waits for the first heartbeat of its
/// workers before it says it is ready, so that a restarted gateway knows
/// the sandboxes of the live ones from its first answer. A worker that is
/// down costs at most a probe's timeout; none is waited for beyond this.
const FIRST_HEARTBEAT_WAIT: Duration = Duration::from_secs(1);

/// Shared by every request of a gateway: what every request passes (its
/// identity and sessions, the faults) and the cluster.
pub(crate) struct Gateway {
    gate: Arc<Gate>,
    cluster: Cluster,
    /// The planted bug `--fault stale-file-reads`: file reads answered
    /// from what this gateway last read or wrote.
    stale_files: Option<StaleFiles>,
}

/// The cache of fault `stale-file-reads`: the content of each file of a
/// sandbox as this gateway last read or wrote it. Nothing else
/// invalidates it: a write made on the worker directly, or through
/// another gateway, leaves it stale. A planted consistency bug, off unless
/// the switch is given.
#[derive(Default)]
pub(crate) struct StaleFiles(
    std::sync::Mutex<std::collections::HashMap<(String, String), axum::body::Bytes>>,
);

impl StaleFiles {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, String), axum::body::Bytes>>
    {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the gateway last saw of `path` in `sandbox`.
    pub(crate) fn get(&self, sandbox: &str, path: &str) -> Option<axum::body::Bytes> {
        self.lock()
            .get(&(sandbox.to_owned(), path.to_owned()))
            .cloned()
    }

    /// Remembers `data` as `path` in `sandbox`.
    pub(crate) fn put(&self, sandbox: &str, path: &str, data: axum::body::Bytes) {
        self.lock()
            .insert((sandbox.to_owned(), path.to_owned()), data);
    }

    /// Forgets `path` in `sandbox` (deleted through the gateway).
    pub(crate) fn forget(&self, sandbox: &str, path: &str) {
        self.lock().remove(&(sandbox.to_owned(), path.to_owned()));
    }
}

/// Runs a gateway until SIGTERM/SIGINT. HOME holds only its identity and
/// sessions.
pub(crate) async fn serve(args: ServeArgs, started: Instant) -> Result<(), ServeError> {
    let workers = workers(&args.workers)?;
    let stop = StopSignals::install()?;
    let token = token_from_env(&args)?;
    if token.is_none() {
        eprintln!("sandboxd: gateway: warning: without --token-env the gateway's token is its own, which its workers refuse");
    }
    let (store, _) = Store::open(&args.home, None, token).map_err(|source| ServeError::Home {
        path: args.home.clone(),
        source,
    })?;
    let (listener, addr) = bind(args.listen).await?;
    let faults = Faults::from_list(&args.faults);
    if faults.stale_file_reads {
        eprintln!("sandboxd: gateway: fault stale-file-reads: file reads are answered from the gateway's cache");
    }
    let gw = Arc::new(Gateway {
        stale_files: faults.stale_file_reads.then(StaleFiles::default),
        gate: Arc::new(Gate::new(
            Arc::clone(&store),
            faults,
            started,
            args.token_window,
        )),
        cluster: Cluster::new(workers),
    });
    heartbeat::start(&gw);
    let deadline = Instant::now() + FIRST_HEARTBEAT_WAIT;
    while !gw.cluster.all_probed() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let router = router(Arc::clone(&gw));
    print_handle(&store, addr, &args)?;
    // A gateway runs no sandbox processes: nothing to end before draining.
    serve_until_stopped(listener, router, args.header_timeout, stop, async {}).await;
    eprintln!("sandboxd: stopped");
    Ok(())
}

/// The `--worker`s, each with its own client: at least one, names unique.
fn workers(specs: &[WorkerSpec]) -> Result<Vec<Worker>, ServeError> {
    if specs.is_empty() {
        return Err(ServeError::Usage(
            "--role gateway needs at least one --worker NAME=URL".into(),
        ));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for s in specs {
        if !seen.insert(s.name.as_str()) {
            return Err(ServeError::Usage(format!(
                "--worker {} is given twice; worker names must be unique",
                s.name
            )));
        }
        let client = reqwest::Client::builder()
            .cookie_store(true)
            // Below a worker's header timeout (10 s by default), so that a
            // pooled connection is not reused just as the worker closes it.
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .map_err(ServeError::Client)?;
        out.push(Worker {
            name: s.name.clone(),
            url: s.url.clone(),
            client,
        });
    }
    Ok(out)
}

fn router(gw: Arc<Gateway>) -> Router {
    use handlers::{capabilities, cluster, create_sandbox, health, list_sandboxes, sandbox, under};
    let gate = Arc::clone(&gw.gate);
    let routes = Router::new()
        .route("/api/health", get(health))
        .route("/api/capabilities", get(capabilities))
        .route("/api/cluster", get(cluster))
        .route("/api/sandboxes", get(list_sandboxes).post(create_sandbox))
        .route("/api/sandboxes/{name}", get(sandbox).delete(sandbox))
        .route("/api/sandboxes/{name}/{*rest}", any(under))
        // The worker applies its own limits; this one only bounds what the
        // gateway holds in memory while relaying.
        .layer(DefaultBodyLimit::max(FILE_BODY_LIMIT))
        .with_state(gw);
    crate::skeleton::finish(routes, gate)
}
