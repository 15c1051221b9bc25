//! The harness: turns the binary's registered tests into libtest-mimic trials,
//! runs each test body on tokio under its timeout, runs its cleanup whatever
//! happened, classifies the outcome (known issues strictly), and records it.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use libtest_mimic::{Arguments, Completion, Failed, FormatSetting, Trial};

use crate::__private::TestDef;
use crate::cx::Cx;
use crate::redact::redact;
use crate::report::{FailureKind, Outcome, TestRecord};

/// Concurrency when neither `--test-threads` nor `TESTKIT_TEST_THREADS` is
/// given. End-to-end tests spend their time waiting on the service, not on a
/// CPU, so the CPU count (libtest's default) would serialize them for
/// nothing; a waiting harness thread costs a few pages of stack.
pub(crate) const DEFAULT_TEST_THREADS: usize = 256;

/// A test's timeout when its attribute gives none and `TESTKIT_TIMEOUT` is
/// unset.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

static NOCAPTURE: AtomicBool = AtomicBool::new(false);

pub(crate) fn nocapture() -> bool {
    NOCAPTURE.load(Ordering::Relaxed)
}

/// The shared runtime. Each test is driven by `Handle::block_on` on its own
/// harness thread, so its future need not be `Send`; spawned tasks and I/O run
/// on the runtime's workers.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("testkit-worker")
            .build()
            .expect("failed to start the tokio runtime")
    })
}

/// A runtime skip: a test (or testkit on its behalf, when the pod is missing
/// or lacks a capability) returns this error to be reported as skipped, with
/// the reason, rather than failed.
#[derive(Debug, Clone)]
pub struct Skip {
    reason: String,
}

impl Skip {
    /// A skip with the exact reason a person reading the report needs.
    pub fn new(reason: impl Into<String>) -> Skip {
        Skip {
            reason: reason.into(),
        }
    }

    /// Why the test was skipped.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "skipped: {}", self.reason)
    }
}

impl std::error::Error for Skip {}

pub(crate) fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    if let Some(code) = crate::modes::dispatch() {
        return code;
    }
    let mut tests: Vec<&'static TestDef> = inventory::iter::<TestDef>.into_iter().collect();
    tests.sort_by_key(|def| (def.module_path, def.name));

    if args.list {
        let trials = tests.iter().map(|&def| trial(def)).collect();
        let conclusion = libtest_mimic::run(&args, trials);
        if !matches!(args.format, Some(FormatSetting::Terse)) {
            // Descriptions go to stderr: stdout stays in libtest's format,
            // which cargo and nextest parse.
            for def in &tests {
                eprintln!("{}: {}", full_name(def), def.description);
            }
        }
        return conclusion.exit_code();
    }

    NOCAPTURE.store(args.nocapture, Ordering::Relaxed);
    if args.test_threads.is_none() {
        args.test_threads = Some(test_threads_from_env().unwrap_or(DEFAULT_TEST_THREADS));
    }
    install_panic_hook();
    // Validate the pod handle and open its session once, before any test:
    // tests then reach the pod without waiting on each other.
    runtime().block_on(crate::pod::init());
    // Ctrl-C and nextest's timeout clean up what the running tests created.
    crate::resource::install_signal_handler();

    let trials: Vec<Trial> = tests.iter().map(|&def| trial(def)).collect();
    // Statically ignored tests never reach their runner; record them here so
    // reports still say why they were skipped.
    let not_run: Vec<&'static TestDef> = tests
        .iter()
        .zip(&trials)
        .filter(|(_, t)| !args.is_filtered_out(t) && args.is_ignored(t))
        .map(|(&def, _)| def)
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if let Ok(run) = crate::run::current() {
        for def in not_run {
            let reason = def.ignore.unwrap_or("ignored");
            let mut record = TestRecord::new(run, def, full_name(def));
            record.outcome = Outcome::Skipped;
            record.skip_reason = Some(format!("ignored: {reason}"));
            crate::report::write_record(run, &record);
        }
        crate::report::finish_binary(run);
    }
    crate::pod::finish();
    // Every test's cleanup ran: the reaper has nothing to do.
    crate::resource::finish_process();
    conclusion.exit_code()
}

fn test_threads_from_env() -> Option<usize> {
    let value = std::env::var("TESTKIT_TEST_THREADS").ok()?;
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Some(n),
        _ => {
            eprintln!(
                "testkit: ignoring TESTKIT_TEST_THREADS={value:?}: expected a positive integer"
            );
            None
        }
    }
}

fn full_name(def: &TestDef) -> String {
    format!("{}::{}", def.module_path, def.name)
}

fn trial(def: &'static TestDef) -> Trial {
    let name = full_name(def);
    Trial::ignorable_test(name.clone(), move || run_test(def, name))
        .with_ignored_flag(def.ignore.is_some())
}

/// What the test body did, before known issues and cleanup are considered.
enum Body {
    Passed,
    Failed { kind: FailureKind, message: String },
    Skipped(String),
}

fn run_test(def: &'static TestDef, name: String) -> Result<Completion, Failed> {
    let run = crate::run::current()
        .map_err(|e| Failed::from(format!("testkit could not set up the run: {e}")))?;
    let started_at = SystemTime::now();
    let start = Instant::now();
    let mut cx = Cx::new(def, name.clone(), run);
    cx.log.start();

    let body = match preflight(def, &mut cx) {
        Some(body) => body,
        None => run_body(def, &mut cx),
    };
    let body_failed = matches!(body, Body::Failed { .. });
    let cleanup = runtime().block_on(cx.finish(body_failed));

    let mut record = TestRecord::new(run, def, name);
    record.started_at_ms = started_at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    record.duration_ms = start.elapsed().as_millis() as u64;
    record.resources = cleanup.resources.clone();
    record.cleanup = cleanup.state;
    record.capabilities_missing = cx.capabilities_missing.clone();
    classify(def, body, &cleanup, &mut record);
    record.output = cx.log.text();
    crate::report::write_record(run, &record);

    let with_log = |message: &str| {
        let log = &record.output;
        if log.is_empty() {
            Failed::from(message)
        } else {
            Failed::from(format!("{message}\n\n--- log ---\n{log}"))
        }
    };
    match record.outcome {
        Outcome::Passed => Ok(Completion::Completed),
        Outcome::Skipped => Ok(Completion::ignored_with(
            record.skip_reason.as_deref().unwrap_or("skipped"),
        )),
        Outcome::ExpectedFailure => Ok(Completion::ignored_with(format!(
            "expected failure: known issue {}",
            def.known_issue.unwrap_or_default()
        ))),
        Outcome::Failed | Outcome::UnexpectedPass => {
            Err(with_log(record.message.as_deref().unwrap_or("failed")))
        }
    }
}

/// Checks that decide a test's fate before its body runs: a known issue that
/// `KNOWN-ISSUES.md` does not list, a pod capability the test requires.
fn preflight(def: &'static TestDef, cx: &mut Cx) -> Option<Body> {
    if let Some(id) = def.known_issue {
        if let Err(message) = crate::report::known_issues::check_listed(id) {
            return Some(Body::Failed {
                kind: FailureKind::KnownIssueUnlisted,
                message,
            });
        }
    }
    match crate::pod::check_requires(def.requires, cx) {
        Ok(()) => None,
        Err(skip) => Some(Body::Skipped(skip.reason().to_owned())),
    }
}

fn run_body(def: &'static TestDef, cx: &mut Cx) -> Body {
    let timeout = def
        .timeout_ms
        .map(Duration::from_millis)
        .unwrap_or_else(default_timeout);
    let location = format!("{}:{}", def.file, def.line);
    IN_TEST.with(|t| *t.borrow_mut() = true);
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let body = (def.run)(cx);
        // The timer must be created inside the runtime's context.
        runtime().block_on(async move { tokio::time::timeout(timeout, body).await })
    }));
    IN_TEST.with(|t| *t.borrow_mut() = false);
    match result {
        Ok(Ok(Ok(()))) => Body::Passed,
        Ok(Ok(Err(error))) => match error.downcast_ref::<Skip>() {
            Some(skip) => Body::Skipped(skip.reason().to_owned()),
            None => Body::Failed {
                kind: FailureKind::Error,
                message: format!(
                    "the test returned an error: {error:#}\n  test defined at {location}"
                ),
            },
        },
        Ok(Err(_elapsed)) => Body::Failed {
            kind: FailureKind::Timeout,
            message: format!(
                "the test timed out after {} and was cancelled\n  test defined at {location}",
                humantime::format_duration(timeout)
            ),
        },
        Err(payload) => {
            let (message, at) = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| (payload_text(&*payload), None));
            let at = at.map(|a| format!(" at {a}")).unwrap_or_default();
            Body::Failed {
                kind: FailureKind::Panic,
                message: format!("the test panicked{at}: {message}\n  test defined at {location}"),
            }
        }
    }
}

fn default_timeout() -> Duration {
    match std::env::var("TESTKIT_TIMEOUT") {
        Ok(value) => humantime::parse_duration(value.trim()).unwrap_or_else(|e| {
            eprintln!("testkit: ignoring TESTKIT_TIMEOUT={value:?}: {e} (expected e.g. 90s, 5m)");
            DEFAULT_TIMEOUT
        }),
        Err(_) => DEFAULT_TIMEOUT,
    }
}

/// Decides the final outcome: known issues are strict (a pinned test must
/// fail, for the documented reason), and a failed cleanup fails the test
/// whatever its body did.
fn classify(
    def: &TestDef,
    body: Body,
    cleanup: &crate::resource::CleanupSummary,
    record: &mut TestRecord,
) {
    match (body, def.known_issue) {
        (Body::Skipped(reason), _) => {
            record.outcome = Outcome::Skipped;
            record.skip_reason = Some(reason);
        }
        (
            Body::Failed {
                kind: FailureKind::KnownIssueUnlisted,
                message,
            },
            _,
        ) => {
            record.fail(FailureKind::KnownIssueUnlisted, message);
        }
        (Body::Passed, None) => record.outcome = Outcome::Passed,
        (Body::Failed { kind, message }, None) => record.fail(kind, message),
        (Body::Passed, Some(id)) => {
            record.outcome = Outcome::UnexpectedPass;
            record.failure_kind = Some(FailureKind::KnownIssueFixed);
            record.message = Some(format!(
                "known issue {id} appears fixed: the test passed but is pinned with `known_issue = \"{id}\"`; \
                 remove the marker from the test and the {id} entry from KNOWN-ISSUES.md"
            ));
        }
        (Body::Failed { message, .. }, Some(id)) => match def.fails_with {
            Some(expected) if !message.contains(expected) => record.fail(
                FailureKind::KnownIssueMismatch,
                format!(
                    "known issue {id}: the failure did not match the documented one \
                     (expected it to contain {expected:?})\n{message}"
                ),
            ),
            _ => {
                record.outcome = Outcome::ExpectedFailure;
                record.message = Some(message);
            }
        },
    }
    if let Some(problem) = &cleanup.failure {
        let message = match record.message.take() {
            Some(body) if record.outcome != Outcome::ExpectedFailure => {
                format!("{problem}\n\nthe test body also failed: {body}")
            }
            _ => problem.clone(),
        };
        record.fail(FailureKind::Cleanup, message);
    }
    if let Some(message) = record.message.take() {
        record.message = Some(redact(&message).into_owned());
    }
}

thread_local! {
    static IN_TEST: RefCell<bool> = const { RefCell::new(false) };
    static LAST_PANIC: RefCell<Option<(String, Option<String>)>> = const { RefCell::new(None) };
}

/// Panics of test bodies are reported in the test's failure (redacted), so
/// the hook keeps them quiet on the test's own thread; other threads' panics
/// print as usual, redacted.
fn install_panic_hook() {
    panic::set_hook(Box::new(|info| {
        let message = payload_text(info.payload());
        let at = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
        if IN_TEST.with(|t| *t.borrow()) {
            LAST_PANIC.with(|p| *p.borrow_mut() = Some((message, at)));
        } else {
            let thread = std::thread::current();
            let at = at.unwrap_or_default();
            eprintln!(
                "thread '{}' panicked at {at}:\n{}",
                thread.name().unwrap_or("<unnamed>"),
                redact(&message)
            );
        }
    }));
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}
