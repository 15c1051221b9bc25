//! The pod: one isolated instance of the service under test.
//!
//! A test process finds its pod through a handle file (`TESTKIT_POD_HANDLE`,
//! else `[pod] handle` of the suite's `testkit.toml`), validates it
//! ([`PodHandle::parse`]), registers the token as a secret, and opens one
//! session, when a test first needs the pod (`cx.pod()`, `requires`, a
//! resource); every test of the process then shares it. A process whose
//! tests never touch the pod does none of it.
//!
//! # Session hand-off
//!
//! How a test authenticates is the suite's `[auth]` (see [`crate::config`]):
//! the handle's token as it is, or a login that turns the handle's
//! credentials into a session or a short-lived token. A login must happen
//! once per run, not once per process: under nextest every test is its own
//! process, and a pod may accept its raw token only for a while (sandboxd's
//! token window). So:
//!
//! - The credential lives in `session.json` (mode 0600) in the run's
//!   [secrets dir](crate::run::secrets_dir), a private folder outside the
//!   results folder (CI uploads results; they never hold a credential): the
//!   pod's name and base URL, the credential, a generation, the capabilities.
//! - A process takes an exclusive `flock` on `session.lock` beside it,
//!   reuses the credential if it belongs to the same pod and the pod still
//!   accepts it (the `[auth] probe` answers 2xx), and otherwise logs in and
//!   writes it. The first process logs in; every later one reuses that.
//! - An answer of `[auth] expired` makes [`Pod::send`] log in again: the
//!   first process to see it bumps the generation, the others take its
//!   credential.
//! - `testkit-runner` calls [`connect`] right after boot, so the login
//!   happens inside a token window even when the first test starts later,
//!   and removes the secrets dir when the run ends.

pub mod check;
mod client;
pub mod cluster;
pub mod container;
pub mod fault;
pub mod handle;
pub mod launch;
pub mod lock;
pub mod nodes;
pub mod process;
mod session;

use std::fmt;

pub use check::{check_auth, check_health, AuthReport, HealthReport, Probe};
pub use client::{Client, RequestBuilder};
pub use handle::{HandleError, HandlePolicy, PodHandle, TOKEN_ALPHABET};
pub use launch::{
    launch, stop_recorded, BinariesLaunch, BootObserver, BootStep, LaunchError, LaunchSpec,
    LaunchedPod, MachineLaunch, MachineStop, StopError, StopReport,
};
pub use session::{connect, ConnectError};

/// The environment variable that names a pod handle file.
pub const HANDLE_ENV: &str = crate::settings::var::POD_HANDLE;

/// Why tests that need a pod are skipped when there is none.
pub const NO_POD_REASON: &str =
    "no pod configured: set TESTKIT_POD_HANDLE to a pod handle file, or run the suite with `testkit-runner run`";

/// A pod of one service, asked for its nodes.
#[derive(Debug, thiserror::Error)]
#[error(
    "the pod is one service, not several nodes: faults are injected into the nodes of a pod \
     of several ([pod.container.nodes] in testkit.toml)"
)]
pub struct NotACluster;

/// A connected pod: its validated handle, an authenticated client, and its
/// capabilities. `Debug` never shows the token or the session.
pub struct Pod {
    handle: PodHandle,
    capabilities: Vec<String>,
    live: std::sync::Arc<std::sync::RwLock<session::Live>>,
    access: std::sync::Arc<session::Access>,
    /// The run whose resources this connection handles: templates' `{run}`.
    run_id: String,
}

impl Pod {
    /// The same connection, handling the resources of the run `run_id`.
    pub fn for_run(mut self, run_id: &str) -> Pod {
        self.run_id = run_id.to_owned();
        self
    }

    /// The run whose resources this connection handles (templates' `{run}`),
    /// empty until [`Pod::for_run`] names one.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The pod's name.
    pub fn name(&self) -> &str {
        self.handle.name()
    }

    /// `scheme://host:port`, canonical.
    pub fn base_url(&self) -> &str {
        self.handle.base_url()
    }

    /// The pod's port.
    pub fn port(&self) -> u16 {
        self.handle.port()
    }

    /// `base_url` followed by `path` (which should start with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.handle.base_url())
    }

    /// An HTTP client that carries the pod's credential as it is now (a
    /// clone is cheap). Requests sent through [`Pod::send`] also survive the
    /// credential's expiry.
    pub fn client(&self) -> Client {
        self.live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .client
            .clone()
    }

    /// Sends the request `build` makes with the pod's client. When the pod
    /// answers that the credential expired (`[auth] expired`), logs in again
    /// (once for every process of the run) and sends it once more.
    ///
    /// ```no_run
    /// # async fn f(pod: &testkit_engine::pod::Pod) -> reqwest::Result<()> {
    /// let items = pod.send(|c| c.get(pod.url("/api/items"))).await?.error_for_status()?;
    /// # Ok(()) }
    /// ```
    pub async fn send(
        &self,
        build: impl Fn(&Client) -> RequestBuilder,
    ) -> reqwest::Result<reqwest::Response> {
        let (client, generation) = {
            let live = self.live.read().unwrap_or_else(|e| e.into_inner());
            (live.client.clone(), live.generation)
        };
        let response = build(&client).send().await?;
        let expired = &self.access.auth.expired;
        if !expired.contains(&response.status().as_u16()) || self.access.auth.login.is_none() {
            return Ok(response);
        }
        let started = std::time::Instant::now();
        let renewed = session::renew(self, generation).await;
        self.trace_renewal(
            started,
            &format!("the credential expired ({})", response.status().as_u16()),
            &renewed,
        );
        match renewed {
            Ok(()) => build(&self.client()).send().await,
            Err(e) => {
                eprintln!(
                    "testkit: pod {}: the credential expired and renewing it failed: {e}",
                    self.name()
                );
                Ok(response)
            }
        }
    }

    /// The suite's `[auth]` this pod was connected with.
    pub fn auth(&self) -> &crate::config::AuthSection {
        &self.access.auth
    }

    /// How many times the run's credential has been obtained: 1 for the
    /// first login, one more for each renewal after an expiry.
    pub fn credential_generation(&self) -> u64 {
        self.live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .generation
    }

    /// Logs in again now, as an expired credential would make [`Pod::send`]
    /// do. Another process of the run that already renewed the credential
    /// past the one this process holds is taken at its word.
    pub async fn renew(&self) -> Result<(), ConnectError> {
        let started = std::time::Instant::now();
        let renewed = session::renew(self, self.credential_generation()).await;
        self.trace_renewal(started, "asked to renew", &renewed);
        renewed
    }

    /// A renewal of the credential, in the running test's trace.
    fn trace_renewal(
        &self,
        started: std::time::Instant,
        why: &str,
        renewed: &Result<(), ConnectError>,
    ) {
        let (title, ok, detail) = match renewed {
            Ok(()) => (
                format!(
                    "{why}: renewed, generation {}",
                    self.credential_generation()
                ),
                true,
                String::new(),
            ),
            Err(e) => (format!("{why}: renewal failed"), false, e.to_string()),
        };
        crate::trace::step::record(crate::trace::EntryKind::Auth, started, title, ok, detail);
    }

    /// What the pod advertises (or what its handle declares).
    pub fn capabilities(&self) -> &[String] {
        &self.capabilities
    }

    /// Whether the pod advertises `cap`.
    pub fn has_capability(&self, cap: &str) -> bool {
        self.capabilities.iter().any(|c| c == cap)
    }

    /// The node `name` of a pod of several (`[pod.container.nodes]`): its
    /// own base URL, reached with this pod's client.
    ///
    /// ```no_run
    /// # async fn f(pod: &testkit_engine::pod::Pod) -> Result<(), Box<dyn std::error::Error>> {
    /// let worker = pod.node("worker-2")?;
    /// let health = pod.client().get(worker.url("/api/health")).send().await?;
    /// # Ok(()) }
    /// ```
    pub fn node(&self, name: &str) -> Result<Node<'_>, NoSuchNode> {
        let cluster = self.handle.cluster().ok_or_else(|| {
            NoSuchNode(format!(
                "the pod has no node `{name}`: it is one service, not several nodes \
                 (a pod of nodes is [pod.container.nodes] in testkit.toml, run as containers)"
            ))
        })?;
        let info = cluster.node(name).map_err(|e| NoSuchNode(e.to_string()))?;
        Ok(Node {
            pod: self,
            name: cluster.nodes.get_key_value(name).expect("found").0,
            base_url: &info.base_url,
        })
    }

    /// The pod's nodes, or why there are none (to inject faults into).
    pub fn cluster(&self) -> Result<&cluster::ClusterInfo, NotACluster> {
        self.handle.cluster().ok_or(NotACluster)
    }

    /// The names of the pod's nodes; empty for a pod of one service.
    pub fn nodes(&self) -> Vec<&str> {
        self.handle
            .cluster()
            .map(|c| c.nodes.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The validated handle (its token included: a registered secret).
    pub fn handle(&self) -> &PodHandle {
        &self.handle
    }

    /// The headers that carry the credential now (`Cookie`,
    /// `Authorization`…), as the client sends them: how a browser signs in
    /// the same way, and what the CLI gets as `{session_cookie}`. Secrets,
    /// all of them.
    pub fn credential_headers(&self) -> Vec<(String, String)> {
        self.live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .headers
            .clone()
    }
}

impl fmt::Debug for Pod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pod")
            .field("name", &self.name())
            .field("base_url", &self.base_url())
            .field("capabilities", &self.capabilities)
            .finish_non_exhaustive()
    }
}

/// [`Pod::node`] of a name that is not one of the pod's nodes.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct NoSuchNode(String);

/// One node of a pod of several, reached through its own port on
/// 127.0.0.1 with the pod's authenticated client.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    pod: &'a Pod,
    name: &'a str,
    base_url: &'a str,
}

impl<'a> Node<'a> {
    /// The node's name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// `http://127.0.0.1:<its port>`.
    pub fn base_url(&self) -> &'a str {
        self.base_url
    }

    /// `base_url` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// The pod's client, carrying its credential.
    pub fn client(&self) -> Client {
        self.pod.client()
    }

    /// [`Pod::send`], to this node.
    pub async fn send(
        &self,
        build: impl Fn(&Client) -> RequestBuilder,
    ) -> reqwest::Result<reqwest::Response> {
        self.pod.send(build).await
    }
}

/// The capabilities in `requires` that the pod does not advertise.
pub fn missing_capabilities(pod: &Pod, requires: &[&str]) -> Vec<String> {
    requires
        .iter()
        .filter(|r| !pod.has_capability(r))
        .map(|r| (*r).to_owned())
        .collect()
}
