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
//! A pod accepts its raw token only during a window after it starts; the
//! token opens a session (a cookie) that keeps working after. Under nextest
//! every test is its own process, so the session must outlive the process
//! that opened it:
//!
//! - The session lives in `<results>/pod/session.json` (mode 0600): the pod's
//!   name and base URL, the cookie, and the capabilities.
//! - A process takes an exclusive `flock` on `<results>/pod/session.lock`,
//!   reuses the session in `session.json` if it belongs to the same pod and
//!   the pod still accepts it, and otherwise exchanges the token for a new
//!   one and writes it. The lock makes the first process do the exchange and
//!   every later one reuse its result.
//! - `testkit-runner` calls [`connect`] right after boot, so the exchange
//!   happens inside the window even when the first test starts much later.
//!
//! The results folder is shared by every process of a run (`TESTKIT_RESULTS_DIR`
//! or derived from the run id), which is what makes the file reachable.

pub(crate) mod check;
pub(crate) mod handle;
pub(crate) mod launch;
mod session;
mod stdio;

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

pub use check::{check_auth, check_health, AuthReport, HealthReport, Probe, CAPABILITIES_PATH};
pub use handle::{HandleError, HandlePolicy, PodHandle, TOKEN_ALPHABET};
pub use launch::{
    launch, stop_recorded, LaunchError, LaunchSpec, LaunchedPod, StopError, StopReport,
};
pub use session::{connect, ConnectError};

pub use crate::process::is_alive;

/// The environment variable that names a pod handle file.
pub const HANDLE_ENV: &str = crate::settings::var::POD_HANDLE;

/// Why tests that need a pod are skipped when there is none.
pub const NO_POD_REASON: &str =
    "no pod configured: set TESTKIT_POD_HANDLE to a pod handle file, or run the suite with `testkit-runner run`";

/// A connected pod: its validated handle, an authenticated client, and its
/// capabilities. `Debug` never shows the token or the session.
pub struct Pod {
    handle: PodHandle,
    client: reqwest::Client,
    capabilities: Vec<String>,
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

    /// An HTTP client that carries the pod's session.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
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
    let policy = match crate::config::current() {
        Ok(c) => HandlePolicy::from_config(&c.pod),
        Err(e) => return Err(PodUnavailable::Invalid(e.to_string())),
    };
    let handle = PodHandle::parse(&text, &policy)
        .map_err(|e| PodUnavailable::Invalid(format!("{e} (in {})", path.display())))?;
    crate::register_secret(handle.token());
    stdio::install();
    let results = crate::run::current().ok().map(|r| r.results_dir.as_path());
    connect(handle, results)
        .await
        .map_err(|e| PodUnavailable::Invalid(e.to_string()))
}

/// Puts stdout and stderr back and flushes their redaction; the harness
/// calls it before the process exits.
pub(crate) fn finish() {
    if matches!(POD.get(), Some(Ok(_))) {
        if let Ok(run) = crate::run::current() {
            redact_tree(&run.results_dir.join("artifacts").join(&run.binary));
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
