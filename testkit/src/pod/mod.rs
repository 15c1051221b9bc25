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

pub(crate) mod check;
pub(crate) mod handle;
pub(crate) mod launch;
mod session;
mod stdio;

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

pub use check::{check_auth, check_health, AuthReport, HealthReport, Probe};
pub use handle::{HandleError, HandlePolicy, PodHandle, TOKEN_ALPHABET};
pub use launch::{
    launch, stop_recorded, LaunchError, LaunchSpec, LaunchedPod, StopError, StopReport,
};
pub use session::{connect, ConnectError};

/// The environment variable that names a pod handle file.
pub const HANDLE_ENV: &str = crate::settings::var::POD_HANDLE;

/// Why tests that need a pod are skipped when there is none.
pub const NO_POD_REASON: &str =
    "no pod configured: set TESTKIT_POD_HANDLE to a pod handle file, or run the suite with `testkit-runner run`";

/// A connected pod: its validated handle, an authenticated client, and its
/// capabilities. `Debug` never shows the token or the session.
pub struct Pod {
    handle: PodHandle,
    capabilities: Vec<String>,
    live: std::sync::Arc<std::sync::RwLock<session::Live>>,
    access: std::sync::Arc<session::Access>,
}

impl Pod {
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
    pub fn client(&self) -> reqwest::Client {
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
    /// # async fn f(pod: &testkit::pod::Pod) -> testkit::Result {
    /// let items = pod.send(|c| c.get(pod.url("/api/items"))).await?.error_for_status()?;
    /// # Ok(()) }
    /// ```
    pub async fn send(
        &self,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
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
        match session::renew(self, generation).await {
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
        session::renew(self, self.credential_generation()).await
    }

    /// What the pod advertises (or what its handle declares).
    pub fn capabilities(&self) -> &[String] {
        &self.capabilities
    }

    /// Whether the pod advertises `cap`.
    pub fn has_capability(&self, cap: &str) -> bool {
        self.capabilities.iter().any(|c| c == cap)
    }

    /// The validated handle (its token included: a registered secret).
    pub fn handle(&self) -> &PodHandle {
        &self.handle
    }

    /// The headers that carry the credential now (`Cookie`,
    /// `Authorization`…), as the client sends them: how a browser signs in
    /// the same way, and what the CLI gets as `{session_cookie}`. Secrets,
    /// all of them.
    pub(crate) fn credential_headers(&self) -> Vec<(String, String)> {
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

/// Why a test process has no usable pod.
#[derive(Debug, Clone)]
pub(crate) enum PodUnavailable {
    /// No handle anywhere: tests that need a pod are skipped.
    NotConfigured,
    /// A handle that does not validate, or a pod that cannot be reached:
    /// tests that need a pod fail with this message.
    Invalid(String),
}

impl fmt::Display for PodUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PodUnavailable::NotConfigured => f.write_str(NO_POD_REASON),
            PodUnavailable::Invalid(message) => f.write_str(message),
        }
    }
}

static POD: OnceLock<Result<Pod, PodUnavailable>> = OnceLock::new();

/// Finds, validates and connects to the pod for this process, once. Cheap
/// when no pod is configured; never panics.
pub(crate) async fn init() {
    if POD.get().is_some() {
        return;
    }
    let result = load().await;
    let _ = POD.set(result);
}

/// The pod, loaded on first use: a test process none of whose tests touch
/// the pod never reads the handle, never opens a session and never starts
/// the redaction of its output. Every caller waits for the one load.
fn loaded() -> &'static Result<Pod, PodUnavailable> {
    POD.get_or_init(|| {
        // The caller may be a test body, inside the runtime, where blocking
        // on it again is refused: a thread outside it drives the load.
        std::thread::scope(|scope| {
            scope
                .spawn(|| crate::runtime::runtime().block_on(load()))
                .join()
                .unwrap_or_else(|_| {
                    Err(PodUnavailable::Invalid(
                        "loading the pod handle panicked".to_owned(),
                    ))
                })
        })
    })
}

async fn load() -> Result<Pod, PodUnavailable> {
    let settings =
        crate::settings::current().map_err(|e| PodUnavailable::Invalid(e.to_string()))?;
    let path = match &settings.pod_handle {
        Some(p) => p.clone(),
        None => {
            let config =
                crate::config::current().map_err(|e| PodUnavailable::Invalid(e.to_string()))?;
            match &config.pod.handle {
                Some(h) => crate::config::suite_dir()
                    .map(|d| d.join(h))
                    .unwrap_or_else(|| h.clone()),
                None => return Err(PodUnavailable::NotConfigured),
            }
        }
    };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        PodUnavailable::Invalid(format!(
            "failed to read the pod handle {}: {e}",
            path.display()
        ))
    })?;
    let config = crate::config::current().map_err(|e| PodUnavailable::Invalid(e.to_string()))?;
    let policy = HandlePolicy::from_suite(config);
    let handle = PodHandle::parse(&text, &policy)
        .map_err(|e| PodUnavailable::Invalid(format!("{e} (in {})", path.display())))?;
    handle.register_secrets();
    stdio::install();
    let session_dir = match crate::run::current() {
        Ok(run) => Some(crate::run::create_secrets_dir(&run.id).map_err(|e| {
            PodUnavailable::Invalid(format!(
                "failed to create the run's private folder {}: {e}",
                crate::run::secrets_dir(&run.id).display()
            ))
        })?),
        Err(_) => None,
    };
    connect(handle, config, session_dir.as_deref())
        .await
        .map_err(|e| PodUnavailable::Invalid(e.to_string()))
}

/// Puts stdout and stderr back and flushes their redaction; the harness
/// calls it before the process exits, once every test's cleanup ran. A
/// process that is its run alone (a plain `cargo test` binary) removes the
/// run's secrets dir: nothing else will, and no other process needs the
/// session in it. One given by `TESTKIT_SECRETS_DIR` is its owner's.
pub(crate) fn finish() {
    if matches!(POD.get(), Some(Ok(_))) {
        if let Ok(run) = crate::run::current() {
            redact_tree(&run.results_dir.join("artifacts").join(&run.binary));
            let given = crate::settings::or_default().secrets_dir.is_some();
            if run.alone && !given {
                let _ = std::fs::remove_dir_all(crate::run::secrets_dir(&run.id));
            }
        }
    }
    stdio::restore();
}

/// Redacts, in place, the text files tests wrote to their artifacts folders:
/// a test that writes the token into an artifact by mistake leaks nothing.
fn redact_tree(dir: &Path) {
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t) if t.is_file() => {
                    if let Ok(text) = std::fs::read_to_string(&path) {
                        if let std::borrow::Cow::Owned(redacted) = crate::redact(&text) {
                            let _ = std::fs::write(&path, redacted);
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// The pod of this process, loaded on first use.
pub(crate) fn current() -> Result<&'static Pod, PodUnavailable> {
    match loaded() {
        Ok(pod) => Ok(pod),
        Err(e) => Err(e.clone()),
    }
}

/// The pod, for a test: without a configured pod the test is skipped
/// ([`Skip`](crate::Skip)); with an unusable one it fails with the reason.
pub(crate) fn require() -> crate::Result<&'static Pod> {
    match current() {
        Ok(pod) => Ok(pod),
        Err(PodUnavailable::NotConfigured) => Err(crate::Skip::new(NO_POD_REASON).into()),
        Err(PodUnavailable::Invalid(message)) => Err(anyhow::anyhow!("{message}")),
    }
}

/// The capabilities in `requires` that the pod does not advertise.
pub(crate) fn missing_capabilities(pod: &Pod, requires: &[&str]) -> Vec<String> {
    requires
        .iter()
        .filter(|r| !pod.has_capability(r))
        .map(|r| (*r).to_owned())
        .collect()
}
