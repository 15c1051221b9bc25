//! The pod: one isolated instance of the service under test.
//!
//! A test process finds its pod through a handle file (`TESTKIT_POD_HANDLE`,
//! else `[pod] handle` of the suite's `testkit.toml`), validates it
//! ([`PodHandle::parse`]), registers the token as a secret, and opens one
//! session before any test runs. Tests get [`Pod`] from `cx.pod()`.
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
mod stdio;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use check::{check_auth, check_health, AuthReport, HealthReport, Probe, CAPABILITIES_PATH};
pub use handle::{HandleError, HandlePolicy, PodHandle, TOKEN_ALPHABET};
pub use launch::{
    is_alive, launch, stop_recorded, LaunchError, LaunchSpec, LaunchedPod, StopError, StopReport,
};

use crate::harness::Skip;
use crate::Cx;

/// The environment variable that names a pod handle file.
pub const HANDLE_ENV: &str = "TESTKIT_POD_HANDLE";

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

/// Connecting to a pod failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The session file or its lock.
    #[error("failed to {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The pod did not answer.
    #[error("failed to reach pod {name} at {url}: {message}")]
    Unreachable {
        /// The pod.
        name: String,
        /// The URL.
        url: String,
        /// The transport error, redacted.
        message: String,
    },
    /// The pod refused the token.
    #[error(
        "pod {name} refused the token (HTTP {status}: {message}); if its token window has passed, \
         a session must be handed on: start the run with `testkit-runner run`, or keep the run's \
         results folder (TESTKIT_RESULTS_DIR) so later processes find {}", session_file.display()
    )]
    Refused {
        /// The pod.
        name: String,
        /// The status.
        status: u16,
        /// The pod's explanation, redacted.
        message: String,
        /// Where a session would have been.
        session_file: PathBuf,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct SessionFile {
    version: u32,
    name: String,
    base_url: String,
    cookie: Option<String>,
    capabilities: Vec<String>,
}

/// Connects to the pod of `handle`: reuses the session handed on in
/// `<results_dir>/pod/session.json` or exchanges the token for one and hands
/// it on (see the module docs). Registers the token and session as secrets.
pub async fn connect(handle: PodHandle, results_dir: Option<&Path>) -> Result<Pod, ConnectError> {
    crate::register_secret(handle.token());
    let Some(results_dir) = results_dir else {
        let (cookie, caps) = exchange(&handle, Path::new("(none)")).await?;
        return Ok(build(handle, cookie, caps));
    };
    let dir = results_dir.join("pod");
    let io = |what, path: &Path| {
        let path = path.to_owned();
        move |source| ConnectError::Io { what, path, source }
    };
    std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    let lock_path = dir.join("session.lock");
    let session_path = dir.join("session.json");
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io("open", &lock_path))?;
    let _lock = lock(lock_file, &lock_path).await?;

    if let Ok(text) = std::fs::read_to_string(&session_path) {
        if let Ok(saved) = serde_json::from_str::<SessionFile>(&text) {
            if saved.version == 1
                && saved.name == handle.name()
                && saved.base_url == handle.base_url()
            {
                if let Some(c) = &saved.cookie {
                    register_cookie(c);
                }
                let pod = build(
                    handle.clone(),
                    saved.cookie.clone(),
                    saved.capabilities.clone(),
                );
                let url = pod.url(CAPABILITIES_PATH);
                match pod.client.get(&url).send().await {
                    Ok(resp) if resp.status().is_success() => return Ok(pod),
                    // A stale session: exchange the token again below.
                    Ok(_) => {}
                    Err(e) => {
                        return Err(ConnectError::Unreachable {
                            name: handle.name().to_owned(),
                            url,
                            message: crate::redact(&e.to_string()).into_owned(),
                        })
                    }
                }
            }
        }
    }
    let (cookie, caps) = exchange(&handle, &session_path).await?;
    let saved = SessionFile {
        version: 1,
        name: handle.name().to_owned(),
        base_url: handle.base_url().to_owned(),
        cookie: cookie.clone(),
        capabilities: caps.clone(),
    };
    let json = serde_json::to_vec_pretty(&saved).expect("serializable");
    write_private(&session_path, &json).map_err(io("write", &session_path))?;
    Ok(build(handle, cookie, caps))
}

async fn lock(
    file: std::fs::File,
    path: &Path,
) -> Result<nix::fcntl::Flock<std::fs::File>, ConnectError> {
    use nix::fcntl::{Flock, FlockArg};
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut file = file;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((f, nix::errno::Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                file = f;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err((_, errno)) => {
                return Err(ConnectError::Io {
                    what: "lock",
                    path: path.to_owned(),
                    source: errno.into(),
                });
            }
        }
    }
}

/// Exchanges the token for a session: one authenticated request whose
/// answer sets the session cookie and lists the capabilities.
async fn exchange(
    handle: &PodHandle,
    session_path: &Path,
) -> Result<(Option<String>, Vec<String>), ConnectError> {
    let url = format!("{}{CAPABILITIES_PATH}", handle.base_url());
    let client = check::plain_client(Duration::from_secs(30));
    let resp = client
        .get(&url)
        .bearer_auth(handle.token())
        .send()
        .await
        .map_err(|e| ConnectError::Unreachable {
            name: handle.name().to_owned(),
            url: url.clone(),
            message: crate::redact(&e.to_string()).into_owned(),
        })?;
    let status = resp.status();
    let cookies: Vec<String> = resp
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .map(|pair| pair.trim().to_owned())
        .filter(|pair| pair.contains('='))
        .collect();
    let body = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .unwrap_or_else(|| body.chars().take(300).collect());
        return Err(ConnectError::Refused {
            name: handle.name().to_owned(),
            status: status.as_u16(),
            message: crate::redact(&message).into_owned(),
            session_file: session_path.to_owned(),
        });
    }
    let caps = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| {
            v.get("capabilities")?.as_array().map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect()
            })
        })
        .unwrap_or_default();
    let cookie = (!cookies.is_empty()).then(|| cookies.join("; "));
    if let Some(c) = &cookie {
        register_cookie(c);
    }
    Ok((cookie, caps))
}

fn register_cookie(cookie: &str) {
    crate::register_secret(cookie);
    for pair in cookie.split(';') {
        if let Some((_, value)) = pair.split_once('=') {
            crate::register_secret(value.trim());
        }
    }
}

fn build(handle: PodHandle, cookie: Option<String>, advertised: Vec<String>) -> Pod {
    use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, COOKIE};
    let mut headers = HeaderMap::new();
    // Without a session cookie, the token itself is the credential.
    let (name, value) = match &cookie {
        Some(c) => (COOKIE, c.clone()),
        None => (AUTHORIZATION, format!("Bearer {}", handle.token())),
    };
    if let Ok(mut v) = HeaderValue::from_str(&value) {
        v.set_sensitive(true);
        headers.insert(name, v);
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(Duration::from_secs(10))
        .no_proxy()
        .build()
        .unwrap_or_else(|_| reqwest::Client::new());
    let capabilities = handle
        .capabilities()
        .map(<[String]>::to_vec)
        .unwrap_or(advertised);
    Pod {
        handle,
        client,
        capabilities,
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

async fn load() -> Result<Pod, PodUnavailable> {
    let path = match std::env::var_os(HANDLE_ENV).filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
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

/// The pod of this process.
pub(crate) fn current() -> Result<&'static Pod, PodUnavailable> {
    match POD.get() {
        Some(Ok(pod)) => Ok(pod),
        Some(Err(e)) => Err(e.clone()),
        None => Err(PodUnavailable::NotConfigured),
    }
}

impl Cx {
    /// The pod: its handle, an authenticated client, its capabilities. Without
    /// a configured pod the test is skipped; with an unusable one it fails.
    pub fn pod(&self) -> crate::Result<&'static Pod> {
        match current() {
            Ok(pod) => Ok(pod),
            Err(PodUnavailable::NotConfigured) => Err(Skip::new(NO_POD_REASON).into()),
            Err(PodUnavailable::Invalid(message)) => Err(anyhow::anyhow!("{message}")),
        }
    }
}

/// Skips a test whose `requires` names a capability the pod lacks, or that
/// requires anything when there is no pod.
pub(crate) fn check_requires(requires: &[&str], cx: &mut Cx) -> Result<(), Skip> {
    if requires.is_empty() {
        return Ok(());
    }
    let pod = match current() {
        Ok(pod) => pod,
        Err(PodUnavailable::NotConfigured) => return Err(Skip::new(NO_POD_REASON)),
        // The body fails on `cx.pod()` with the reason.
        Err(PodUnavailable::Invalid(_)) => return Ok(()),
    };
    let missing: Vec<String> = requires
        .iter()
        .filter(|r| !pod.has_capability(r))
        .map(|r| (*r).to_owned())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let advertised = if pod.capabilities().is_empty() {
        "none".to_owned()
    } else {
        pod.capabilities().join(", ")
    };
    let what = match missing.as_slice() {
        [one] => format!("capability `{one}`"),
        many => format!(
            "capabilities {}",
            many.iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let reason = format!(
        "the pod `{}` lacks required {what} (it advertises: {advertised})",
        pod.name()
    );
    cx.capabilities_missing = missing;
    Err(Skip::new(reason))
}

/// Writes `data` to `path` atomically with mode 0600.
pub(crate) fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp{}-{}", std::process::id(), random_id(6)));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// `len` random lowercase letters and digits.
pub(crate) fn random_id(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = vec![0u8; len];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}
