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
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware as mw;
use axum::routing::{any, get};
use axum::Router;

use crate::config::{Faults, ServeArgs, WorkerSpec};
use crate::error::ApiError;
use crate::server::conn::serve_connections;
use crate::server::middleware::{auth, jsonify_errors, log_and_count, Gate};
use crate::server::FILE_BODY_LIMIT;
use crate::server::{bind, print_handle, token_from_env, ServeError, StopSignals};
use crate::state::Store;
use placement::{Cluster, Worker};

/// How long a starting gateway waits for the first heartbeat of its
/// workers before it says it is ready, so that a restarted gateway knows
/// the sandboxes of the live ones from its first answer. A worker that is
/// down costs at most a probe's timeout; none is waited for beyond this.
const FIRST_HEARTBEAT_WAIT: Duration = Duration::from_secs(1);

/// Shared by every request of a gateway.
pub(crate) struct Gateway {
    store: Arc<Store>,
    faults: Faults,
    started: Instant,
    window: Duration,
    requests: AtomicU64,
    cluster: Cluster,
}

impl Gate for Gateway {
    fn store(&self) -> &Store {
        &self.store
    }
    fn faults(&self) -> &Faults {
        &self.faults
    }
    fn started(&self) -> Instant {
        self.started
    }
    fn window(&self) -> Duration {
        self.window
    }
    fn requests(&self) -> &AtomicU64 {
        &self.requests
    }
}

/// Runs a gateway until SIGTERM/SIGINT. HOME holds only its identity and
/// sessions.
pub(crate) async fn serve(args: ServeArgs, started: Instant) -> Result<(), ServeError> {
    let workers = workers(&args.workers)?;
    let mut stop = StopSignals::install()?;
    let token = token_from_env(&args)?;
    if token.is_none() {
        eprintln!("sandboxd: gateway: warning: without --token-env the gateway's token is its own, which its workers refuse");
    }
    let (store, _) = Store::open(&args.home, None, token).map_err(|source| ServeError::Home {
        path: args.home.clone(),
        source,
    })?;
    let (listener, addr) = bind(args.listen).await?;
    let gw = Arc::new(Gateway {
        store: Arc::clone(&store),
        faults: Faults::from_list(&args.faults),
        started,
        window: args.token_window,
        requests: AtomicU64::new(0),
        cluster: Cluster::new(workers),
    });
    heartbeat::start(&gw);
    let deadline = Instant::now() + FIRST_HEARTBEAT_WAIT;
    while !gw.cluster.all_probed() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let router = router(Arc::clone(&gw));
    print_handle(&store, addr, &args)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_connections(
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
    if tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .is_err()
    {
        eprintln!("sandboxd: open connections did not finish in time; closing them");
    }
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
            .map_err(|e| ServeError::Usage(format!("failed to make an HTTP client: {e}")))?;
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
    Router::new()
        .route("/api/health", get(health))
        .route("/api/capabilities", get(capabilities))
        .route("/api/cluster", get(cluster))
        .route("/api/sandboxes", get(list_sandboxes).post(create_sandbox))
        .route("/api/sandboxes/{name}", get(sandbox).delete(sandbox))
        .route("/api/sandboxes/{name}/{*rest}", any(under))
        // The worker applies its own limits; this one only bounds what the
        // gateway holds in memory while relaying.
        .layer(DefaultBodyLimit::max(FILE_BODY_LIMIT))
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this route",
            )
        })
        .layer(mw::from_fn_with_state(Arc::clone(&gw), auth::<Gateway>))
        .layer(mw::map_response(jsonify_errors))
        .layer(mw::from_fn_with_state(
            Arc::clone(&gw),
            log_and_count::<Gateway>,
        ))
        .with_state(gw)
}
