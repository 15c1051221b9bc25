//! The test process's wiring: what it reads once from its environment and
//! its suite, and the files it writes for the runner.
//!
//! A test process reads its settings, its run, its suite's config and kinds,
//! its known issues and its pod once, on first use, and keeps them for its
//! life; it writes its records and starts to one file each. Everything below
//! this module (the engine, and the rest of the harness) takes them as
//! arguments: only the facade's entry points (the harness, `Cx`, the reaper
//! and sweeper roles) reach for them here.
//!
//! # Process-wide state that lives elsewhere, and why
//!
//! The other statics of testkit are not read from anywhere: each is the
//! state of one mechanism, kept private beside the code that keeps its
//! rules, and most sit in modules below this one, which cannot reach up.
//!
//! | static | module | why there |
//! | --- | --- | --- |
//! | `RUNTIME`, `CONCURRENT_TESTS`, the thread-local `BOTTOM` | `runtime` | the tokio runtime and how many workers it gets; below everything that blocks on it, this module included |
//! | `ECHO` | `log` | `--nocapture`: whether a logged line is echoed; below this module |
//! | `TAG`, `WINDOWS`, `JUDGED` | `leftovers` | the process's tag and every test's time window, for charging leftover processes to tests; below this module |
//! | `REAPER` | `reaper` | the reaper child and its pipe: only its spawn and shutdown touch it |
//! | `OUTSTANDING`, `UNFINISHED`, `SHUTTING_DOWN`, `LIVE` | `tracker` | the counts and live trackers the signal handler waits on; they change with each tracker's private state |
//! | the thread-locals `IN_TEST`, `LAST_PANIC` | `harness::panics` | the panic hook's view of the test on its thread |

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use engine::config::{ConfigError, SuiteConfig};
use engine::pod::{connect, HandlePolicy, Pod, PodHandle, NO_POD_REASON};
use engine::report::{
    KnownIssues, RecordFile, StartFile, TestRecord, TestStart, KNOWN_ISSUES_FILE,
};
use engine::resource::{Event, Journal, JournalEntry, KindError, Kinds, ResourceKind};
use engine::run::Run;
use engine::settings::{Settings, SettingsError};
use testkit_engine as engine;

/// An error of a process global, as a test's error: its message and its
/// chain, printed once each.
#[derive(Debug)]
pub(crate) struct Shared<E: 'static>(pub(crate) &'static E);

impl<E: std::error::Error> fmt::Display for Shared<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.0, f)
    }
}

impl<E: std::error::Error> std::error::Error for Shared<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The settings of this process, read on first use.
pub(crate) fn settings() -> Result<&'static Settings, &'static SettingsError> {
    static SETTINGS: OnceLock<Result<Settings, SettingsError>> = OnceLock::new();
    SETTINGS.get_or_init(Settings::from_env).as_ref()
}

/// The settings, or the defaults when they are invalid: for code that must
/// go on (a reaper, a cleanup) where the harness already reported the error.
pub(crate) fn settings_or_default() -> &'static Settings {
    static DEFAULT: OnceLock<Settings> = OnceLock::new();
    settings().unwrap_or_else(|_| DEFAULT.get_or_init(Settings::defaults))
}

/// The run of this process. Unusable settings are an error that every test
/// reports rather than a panic.
pub(crate) fn run() -> Result<&'static Run, &'static SettingsError> {
    static RUN: OnceLock<Result<Run, &'static SettingsError>> = OnceLock::new();
    RUN.get_or_init(|| settings().map(Run::from_settings))
        .as_ref()
        .map_err(|e| *e)
}

/// The config of this process's suite: defaults when there is no suite dir
/// or no `testkit.toml`.
pub(crate) fn config() -> Result<&'static SuiteConfig, &'static ConfigError> {
    static CONFIG: OnceLock<Result<SuiteConfig, ConfigError>> = OnceLock::new();
    CONFIG
        .get_or_init(|| match suite_dir() {
            Some(dir) => SuiteConfig::load(dir),
            None => Ok(SuiteConfig::default()),
        })
        .as_ref()
}

/// The suite's resource-name prefix.
pub(crate) fn name_prefix() -> &'static str {
    config()
        .map(|c| c.suite.name_prefix.as_str())
        .unwrap_or("ct")
}

/// The manifest directory of the test binary, as it was when it was
/// compiled: `testkit::main!()` hands it over, so that a binary run directly
/// (a nextest archive, a debugger) still finds its suite.
static COMPILED_MANIFEST_DIR: OnceLock<&'static str> = OnceLock::new();

/// Called by the harness before anything reads the config.
pub(crate) fn set_compiled_manifest_dir(dir: &'static str) {
    let _ = COMPILED_MANIFEST_DIR.set(dir);
}

/// The suite's workspace root: `TESTKIT_SUITE_DIR`, else the suite dir of
/// the manifest dir (`CARGO_MANIFEST_DIR`, which cargo and nextest set for
/// test processes, else the one the binary was compiled in); see
/// [`engine::config::find_suite_dir`].
pub(crate) fn suite_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let settings = settings_or_default();
        if let Some(dir) = &settings.suite_dir {
            return Some(dir.clone());
        }
        let manifest_dir = settings.manifest_dir.clone().or_else(|| {
            COMPILED_MANIFEST_DIR
                .get()
                .map(PathBuf::from)
                .filter(|d| d.is_dir())
        })?;
        Some(engine::config::find_suite_dir(&manifest_dir))
    })
    .as_deref()
}

/// The kinds of this process's suite: its `testkit.toml`'s and the Rust
/// kinds its binary registers, loaded once.
pub(crate) fn kinds() -> Result<&'static Kinds, &'static KindsError> {
    static KINDS: OnceLock<Result<Kinds, KindsError>> = OnceLock::new();
    KINDS
        .get_or_init(|| {
            let config = config().map_err(KindsError::Config)?;
            let path = suite_dir()
                .unwrap_or(Path::new("."))
                .join(engine::config::CONFIG_FILE);
            let linked: Vec<_> = inventory::iter::<RustKind>
                .into_iter()
                .map(|k| (k.name, k.kind))
                .collect();
            Kinds::from_config_linking(config, &path, &linked).map_err(KindsError::Kind)
        })
        .as_ref()
}

/// Why the suite's kinds cannot be used: its config, or one of its kinds.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KindsError {
    /// `testkit.toml` cannot be used.
    #[error(transparent)]
    Config(&'static ConfigError),
    /// A `[resources.<kind>]` table cannot be used.
    #[error(transparent)]
    Kind(KindError),
}

/// A Rust kind a test binary registers; [`resource_kind!`](crate::resource_kind)
/// makes one.
pub struct RustKind {
    name: &'static str,
    kind: &'static dyn ResourceKind,
}

impl RustKind {
    /// The kind `kind`, by the name `testkit.toml` declares it by.
    pub const fn new(name: &'static str, kind: &'static dyn ResourceKind) -> RustKind {
        RustKind { name, kind }
    }
}

inventory::collect!(RustKind);

/// This process's journal.
pub(crate) fn journal(run: &Run) -> &'static Journal {
    static JOURNAL: OnceLock<Journal> = OnceLock::new();
    JOURNAL.get_or_init(|| engine::resource::journal::for_process(run))
}

/// A journal entry of this process's run, `None` without a run.
pub(crate) fn journal_entry(
    event: Event,
    kind: &str,
    name: &str,
    test: &str,
    detail: Option<String>,
) -> Option<JournalEntry> {
    let run = run().ok()?;
    Some(JournalEntry::new(event, kind, name, &run.id, test, detail))
}

/// Fails with a message when `id` is not listed in the suite's
/// `KNOWN-ISSUES.md`, or the file cannot be used.
pub(crate) fn check_known_issue_listed(id: &str) -> Result<(), String> {
    static KNOWN: OnceLock<Result<KnownIssues, String>> = OnceLock::new();
    let known = KNOWN.get_or_init(|| {
        let Some(dir) = suite_dir() else {
            return Err(format!(
                "known issue {id} cannot be checked: the suite's directory is unknown \
                 (set TESTKIT_SUITE_DIR to the directory holding {KNOWN_ISSUES_FILE})"
            ));
        };
        KnownIssues::load(dir).map_err(|e| e.to_string())
    });
    match known {
        Ok(known) => known
            .check_listed(id)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(problem) => Err(format!("known issue {id} cannot be checked: {problem}")),
    }
}

/// This process's record file.
static RECORD_FILE: RecordFile = RecordFile::new();

/// Set once a record could not be written: the process then fails, since
/// a test whose record is lost counts for nothing.
static RECORD_LOST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Appends `record` to this process's record file.
pub(crate) fn write_record(run: &Run, record: &TestRecord) {
    if let Err(e) = RECORD_FILE.write(run, record) {
        RECORD_LOST.store(true, std::sync::atomic::Ordering::SeqCst);
        eprintln!(
            "testkit: failed to write the record of {}: {e}",
            record.name
        );
    }
}

/// This process's start file: each test's start, written ahead of its body.
static START_FILE: StartFile = StartFile::new();

/// Appends a test's start before its body runs. A start that cannot be
/// written loses the test as a lost record would: the process fails.
pub(crate) fn write_start(run: &Run, start: &TestStart) {
    if let Err(e) = START_FILE.write(run, start) {
        RECORD_LOST.store(true, std::sync::atomic::Ordering::SeqCst);
        eprintln!("testkit: failed to write the start of {}: {e}", start.name);
    }
}

/// Whether a record of this process could not be written.
pub(crate) fn record_lost() -> bool {
    RECORD_LOST.load(std::sync::atomic::Ordering::SeqCst)
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
pub(crate) async fn init_pod() {
    if POD.get().is_some() {
        return;
    }
    let result = load_pod().await;
    let _ = POD.set(result);
}

/// The pod, loaded on first use: a test process none of whose tests touch
/// the pod never reads the handle, never opens a session and never starts
/// the redaction of its output. Every caller waits for the one load.
fn loaded_pod() -> &'static Result<Pod, PodUnavailable> {
    POD.get_or_init(|| {
        // The caller may be a test body, inside the runtime, where blocking
        // on it again is refused: a thread outside it drives the load.
        std::thread::scope(|scope| {
            scope
                .spawn(|| crate::runtime::runtime().block_on(load_pod()))
                .join()
                .unwrap_or_else(|_| {
                    Err(PodUnavailable::Invalid(
                        "loading the pod handle panicked".to_owned(),
                    ))
                })
        })
    })
}

/// The pod's handle as its file says, validated, without connecting to the
/// pod: what undoing a fault needs (the nodes), when connecting could
/// wait on the very node the fault froze. Read once.
pub(crate) fn pod_handle() -> Result<&'static PodHandle, String> {
    static HANDLE: OnceLock<Result<PodHandle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| match read_handle() {
            Ok(handle) => Ok(handle),
            Err(e) => Err(e.to_string()),
        })
        .as_ref()
        .map_err(String::clone)
}

/// Reads and validates the handle the settings or `[pod] handle` name, and
/// registers its secrets.
fn read_handle() -> Result<PodHandle, PodUnavailable> {
    let settings = settings().map_err(|e| PodUnavailable::Invalid(e.to_string()))?;
    let path = match &settings.pod_handle {
        Some(p) => p.clone(),
        None => {
            let config = config().map_err(|e| PodUnavailable::Invalid(e.to_string()))?;
            match &config.pod.handle {
                Some(h) => suite_dir().map(|d| d.join(h)).unwrap_or_else(|| h.clone()),
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
    let config = config().map_err(|e| PodUnavailable::Invalid(e.to_string()))?;
    let policy = HandlePolicy::from_suite(config);
    let handle = PodHandle::parse(&text, &policy)
        .map_err(|e| PodUnavailable::Invalid(format!("{e} (in {})", path.display())))?;
    handle.register_secrets();
    Ok(handle)
}

/// How long connecting to the pod (its login, its capabilities) may take.
const CONNECT_WITHIN: Duration = Duration::from_secs(60);

async fn load_pod() -> Result<Pod, PodUnavailable> {
    let handle = read_handle()?;
    let config = config().map_err(|e| PodUnavailable::Invalid(e.to_string()))?;
    engine::redact::stdio::install();
    let session_dir = match run() {
        Ok(_) => Some(secrets_dir().map_err(|e| PodUnavailable::Invalid(e.to_owned()))?),
        Err(_) => None,
    };
    let started = std::time::Instant::now();
    // Bounded: the test that asked for the pod waits on this outside its
    // own timeout, and a paused or hung pod would hold it for ever.
    let connected =
        tokio::time::timeout(CONNECT_WITHIN, connect(handle.clone(), config, session_dir)).await;
    let connected = match connected {
        Ok(Ok(pod)) => Ok(pod),
        // Why it failed, then what state the pod is in: a paused or
        // exited pod says so, where the error alone says "error sending
        // request".
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "connecting to pod `{}` at {} did not finish within {}s: is it paused or hung? \
             It is not answering its login or capability requests",
            handle.name(),
            handle.base_url(),
            CONNECT_WITHIN.as_secs()
        )),
    };
    let connected = match connected {
        Ok(pod) => Ok(pod),
        Err(why) => {
            let state = handle.describe(20, Duration::from_secs(10)).await;
            Err(crate::redact(&format!("{why}{state}")).into_owned())
        }
    };
    crate::engine::trace::step::record(
        crate::engine::trace::EntryKind::Auth,
        started,
        match &connected {
            Ok(pod) => format!(
                "connected to pod {}: credential generation {}",
                pod.name(),
                pod.credential_generation()
            ),
            Err(_) => "connecting to the pod failed".to_owned(),
        },
        connected.is_ok(),
        connected.as_ref().err().cloned().unwrap_or_default(),
    );
    connected
        .map(|pod| match run() {
            Ok(run) => pod.for_run(&run.id),
            Err(_) => pod,
        })
        .map_err(PodUnavailable::Invalid)
}

/// The run's secrets dir ([`engine::run::secrets_dir`]), made on first
/// use: the folder every test process of the run shares, where the pod's
/// session and the pod lock are.
pub(crate) fn secrets_dir() -> Result<&'static Path, &'static str> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let run = run().map_err(|e| e.to_string())?;
        let settings = settings_or_default();
        engine::run::create_secrets_dir(settings, &run.id).map_err(|e| {
            format!(
                "failed to create the run's private folder {}: {e}",
                engine::run::secrets_dir(settings, &run.id).display()
            )
        })
    })
    .as_deref()
    .map_err(String::as_str)
}

/// Puts stdout and stderr back and flushes their redaction; the harness
/// calls it before the process exits, once every test's cleanup ran. A
/// process that is its run alone (a plain `cargo test` binary) removes the
/// run's secrets dir: nothing else will, and no other process needs the
/// session or the pod lock in it. One given by `TESTKIT_SECRETS_DIR` is its
/// owner's.
pub(crate) fn finish_pod() {
    let run = run().ok();
    if let (Some(Ok(_)), Some(run)) = (POD.get(), run) {
        redact_tree(&run.results_dir.join("artifacts").join(&run.binary));
    }
    let given = settings_or_default().secrets_dir.is_some();
    if let (Ok(dir), Some(run)) = (secrets_dir(), run) {
        if run.alone && !given {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    engine::redact::stdio::restore();
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
                        if let std::borrow::Cow::Owned(redacted) = engine::redact(&text) {
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
pub(crate) fn pod() -> Result<&'static Pod, PodUnavailable> {
    match loaded_pod() {
        Ok(pod) => Ok(pod),
        Err(e) => Err(e.clone()),
    }
}

/// The pod, for a test: without a configured pod the test is skipped
/// ([`Skip`](crate::Skip)); with an unusable one it fails with the reason.
pub(crate) fn require_pod() -> crate::Result<&'static Pod> {
    match pod() {
        Ok(pod) => Ok(pod),
        Err(PodUnavailable::NotConfigured) => Err(crate::Skip::new(NO_POD_REASON).into()),
        Err(PodUnavailable::Invalid(message)) => Err(anyhow::anyhow!("{message}")),
    }
}
