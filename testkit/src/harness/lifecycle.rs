//! One test's lifecycle: preflight (known issue listed, capabilities),
//! the pod lock (`pod_lock`), the body on the shared runtime under its
//! timeout, its browsers ended (with the `browser` feature) and cleanup
//! whatever happened, the lock let go, the outcome (known issues strictly),
//! and its record.

use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant, SystemTime};

use libtest_mimic::{Completion, Failed};

use super::{panics, TestDef};
use crate::cx::Cx;
use crate::engine::config::RetryPolicy;
use crate::engine::report::{FailureCategory, FailureKind, Outcome, TestRecord};
use crate::engine::settings::{Keep, Settings};
use crate::redact;
use crate::runtime::block_on;
use crate::tracker::CleanupSummary;
use crate::Skip;

/// What the test body did, before known issues and cleanup are considered.
enum Body {
    Passed,
    /// `category`, when the failure says more of whose fault it is than
    /// its kind does ([`FailureCategory::of_kind`]).
    Failed {
        kind: FailureKind,
        message: String,
        category: Option<FailureCategory>,
    },
    Skipped(String),
    /// A retry that `[suite] retry = "infrastructure"` does not run: it
    /// fails as the attempt before it did, whatever the test is pinned to.
    NotRetried {
        kind: FailureKind,
        message: String,
        category: FailureCategory,
    },
}

/// A failure of what the test runs on, before its body ran.
fn failed_infrastructure(message: String) -> Body {
    Body::Failed {
        kind: FailureKind::Error,
        message,
        category: Some(FailureCategory::Infrastructure),
    }
}

pub(super) fn run_test(
    def: &'static TestDef,
    settings: Option<&'static Settings>,
) -> Result<Completion, Failed> {
    let settings = settings.ok_or_else(|| match crate::globals::settings() {
        Err(e) => Failed::from(format!("testkit could not set up the run: {e}")),
        Ok(_) => Failed::from("testkit could not set up the run"),
    })?;
    let run = crate::globals::run()
        .map_err(|e| Failed::from(format!("testkit could not set up the run: {e}")))?;
    let started_at = SystemTime::now();
    let start = Instant::now();
    let attempt = settings.nextest_attempt.unwrap_or(1).max(1);
    // Written ahead: a test that never ends (killed, exited halfway, its
    // record lost) is still known to have begun, and counts as failed.
    crate::globals::write_start(
        run,
        &crate::engine::report::TestStart {
            run_id: run.id.clone(),
            binary: run.binary.clone(),
            name: def.full_name(),
            attempt,
            pid: std::process::id(),
            at_ms: millis_since_epoch(started_at),
            file: def.file.to_owned(),
            line: def.line,
        },
    );
    let mut cx = Cx::new(
        def.full_name(),
        def.description,
        run,
        settings.nextest_attempt,
        def.options.exclusive,
    );
    cx.log.start();
    let watch = crate::leftovers::begin(&def.full_name());
    let trace_policy = trace_policy(def, settings);
    let trace = crate::trace::begin(&def.full_name(), trace_policy);

    // A test whose fate the preflight decided (skipped, failed before it
    // ran) takes no lock: its body never uses the pod.
    let (body, lock) = match not_retried(def, run, attempt).or_else(|| preflight(def, &mut cx)) {
        Some(body) => (body, None),
        None => match super::pod_lock::take(&cx) {
            Ok(lock) => {
                if lock.mode() == crate::engine::report::LockMode::Exclusive {
                    use std::os::fd::AsRawFd;
                    cx.resources.set_pod_lock(lock.as_fd().as_raw_fd());
                }
                let traced = trace.as_ref().map(|r| r.id());
                (run_body(def, &mut cx, settings.timeout, traced), Some(lock))
            }
            Err(e) => (failed_infrastructure(e.to_string()), None),
        },
    };
    let body_failed = matches!(body, Body::Failed { .. } | Body::NotRetried { .. });
    #[cfg(feature = "browser")]
    let browsers = block_on(cx.finish_browsers(body_failed, settings.browser_teardown));
    let cleanup_started = Instant::now();
    let cleanup = block_on(cx.finish(settings.keep, body_failed));
    crate::trace::cleaned_up(cleanup_started, &cleanup);
    // After cleanup, which may still stop what the test started.
    let keep_processes = match settings.keep_processes {
        Keep::Never => false,
        Keep::OnFailure => body_failed,
        Keep::Always => true,
    };
    let leftovers = block_on(crate::leftovers::finish(watch, keep_processes));
    // Everything the test did to the pod is undone: the others may have it.
    // The reaper lets go of its duplicate of the lock first, if it has one.
    cx.resources.forget_pod_lock();
    let lock = lock.map(|lock| lock.release());

    let mut record = def.record(run);
    record.attempt = attempt;
    record.started_at_ms = millis_since_epoch(started_at);
    record.duration_ms = start.elapsed().as_millis() as u64;
    record.resources = cleanup.resources.clone();
    record.cleanup = cleanup.state;
    record.faults = cleanup.faults.clone();
    record.capabilities_missing = cx.capabilities_missing.clone();
    record.leftover_processes = leftovers.processes;
    record.lock = lock;
    classify(def, body, &cleanup, leftovers.failure, &mut record);
    #[cfg(feature = "browser")]
    crate::browser::judge(&browsers, &mut record);
    record.output = cx.log.text();
    let artifacts =
        crate::engine::run::artifacts_dir(&run.results_dir, &run.binary, &def.full_name());
    crate::trace::finish(trace, trace_policy, &artifacts, &mut record);
    if let Some(history) = cx.recorded_history() {
        write_history(history, &artifacts, &mut record);
    }
    crate::globals::write_record(run, &record);

    completion(def, &record)
}

/// What libtest-mimic is told of a test its record says the fate of: a
/// failure carries the test's log.
fn completion(def: &TestDef, record: &TestRecord) -> Result<Completion, Failed> {
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
            def.options.known_issue.unwrap_or_default()
        ))),
        Outcome::Failed | Outcome::UnexpectedPass => {
            Err(with_log(record.message.as_deref().unwrap_or("failed")))
        }
    }
}

/// Writes the history the test recorded to `history.json` in its artifacts
/// folder, and names it in the record: the evidence of its checks, passed
/// or failed. An operation still open is written as `info`.
fn write_history(
    history: &crate::engine::history::History,
    artifacts: &std::path::Path,
    record: &mut TestRecord,
) {
    let path = artifacts.join(crate::engine::history::FILE_NAME);
    match history.snapshot().write(&path) {
        Ok(()) => record.history = Some(path.display().to_string()),
        Err(e) => eprintln!(
            "testkit: {}: the history could not be written to {}: {e}",
            record.name,
            path.display()
        ),
    }
}

/// The test's own `trace = "…"`, else `TESTKIT_TRACE`.
fn trace_policy(def: &TestDef, settings: &Settings) -> crate::engine::settings::TracePolicy {
    def.options
        .trace
        .and_then(crate::engine::settings::TracePolicy::parse)
        .unwrap_or(settings.trace)
}

fn millis_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Checks that decide a test's fate before its body runs: a known issue that
/// `KNOWN-ISSUES.md` does not list, a pod capability the test requires.
fn preflight(def: &'static TestDef, cx: &mut Cx) -> Option<Body> {
    // A suite config that cannot be used fails every test, pod or not: a
    // mistake in testkit.toml must never hide behind skips.
    if let Err(message) = crate::globals::config()
        .map(|_| ())
        .map_err(|e| e.to_string())
        .and_then(|()| crate::tracker::check_kinds().map_err(|e| e.to_string()))
    {
        return Some(Body::Failed {
            kind: FailureKind::Config,
            message: format!("the suite's config cannot be used: {message}"),
            category: None,
        });
    }
    if let Some(id) = def.options.known_issue {
        if let Err(message) = crate::globals::check_known_issue_listed(id) {
            return Some(Body::Failed {
                kind: FailureKind::KnownIssueUnlisted,
                message,
                category: None,
            });
        }
    }
    match check_requires(def.options.requires, cx) {
        Ok(skip) => skip.map(|skip| Body::Skipped(skip.reason().to_owned())),
        Err(message) => Some(failed_infrastructure(message)),
    }
}

/// Skips a test whose `requires` names a capability the pod lacks, or that
/// requires anything when there is no pod. A test that requires anything of
/// a pod that is configured but unusable fails with the reason: a
/// requirement is only ever checked against a validated pod.
fn check_requires(requires: &[&str], cx: &mut Cx) -> Result<Option<Skip>, String> {
    if requires.is_empty() {
        return Ok(None);
    }
    let pod = match crate::globals::pod() {
        Ok(pod) => pod,
        Err(crate::globals::PodUnavailable::NotConfigured) => {
            return Ok(Some(Skip::new(crate::engine::pod::NO_POD_REASON)))
        }
        Err(crate::globals::PodUnavailable::Invalid(message)) => {
            return Err(format!(
                "the test requires {} of the pod, and the pod is unusable: {message}",
                requires.join(", ")
            ))
        }
    };
    let missing = crate::engine::pod::missing_capabilities(pod, requires);
    if missing.is_empty() {
        return Ok(None);
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
    Ok(Some(Skip::new(reason)))
}

/// Runs the test's body under its timeout; `traced` is its trace's id,
/// which the hang report of a timeout is about.
fn run_body(
    def: &'static TestDef,
    cx: &mut Cx,
    default_timeout: Duration,
    traced: Option<u64>,
) -> Body {
    let timeout = def
        .options
        .timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(default_timeout);
    let location = format!("{}:{}", def.file, def.line);
    let held = cx.resources.held_faults();
    let started = Instant::now();
    let step = cx.step.clone();
    let _listed = super::hang::list_in_body(cx.name(), started, traced, held.clone(), step.clone());
    panics::in_test(true);
    let result = panic::catch_unwind(AssertUnwindSafe(|| {
        let body = (def.run)(cx);
        // The timer must be created inside the runtime's context. The body
        // is dropped (its requests and waits cancelled) only once the hang
        // report has said what it was waiting on.
        block_on(async move {
            let mut body = std::pin::pin!(body);
            match tokio::time::timeout(timeout, body.as_mut()).await {
                Ok(done) => Ok(done),
                Err(_) => Err(super::hang::report(
                    super::hang::When::TimedOut,
                    started.elapsed(),
                    traced,
                    &held,
                    &step,
                )
                .await),
            }
        })
    }));
    panics::in_test(false);
    match result {
        Ok(Ok(Ok(()))) => Body::Passed,
        Ok(Ok(Err(error))) => match error.downcast_ref::<Skip>() {
            Some(skip) => Body::Skipped(skip.reason().to_owned()),
            None => Body::Failed {
                kind: FailureKind::Error,
                // An HTTP client's error names its URL whole (reqwest's
                // `error_for_status` does): its credentials are hidden.
                message: crate::engine::redact::redact_urls_in(&format!(
                    "the test returned an error: {error:#}\n  test defined at {location}"
                )),
                category: Some(category_of_error(&error)),
            },
        },
        Ok(Err(hang)) => Body::Failed {
            kind: FailureKind::Timeout,
            message: format!(
                "the test timed out after {} and was cancelled\n  test defined at {location}\n{hang}",
                humantime::format_duration(timeout)
            ),
            category: None,
        },
        Err(payload) => {
            let (message, at) =
                panics::take_last().unwrap_or_else(|| (panics::payload_text(&*payload), None));
            let at = at.map(|a| format!(" at {a}")).unwrap_or_default();
            Body::Failed {
                kind: FailureKind::Panic,
                message: format!("the test panicked{at}: {message}\n  test defined at {location}"),
                category: None,
            }
        }
    }
}

/// Decides the final outcome: known issues are strict (a pinned test must
/// fail, for the documented reason), and a failed cleanup (resources that
/// leaked, processes `leftovers` names as left running) fails the test
/// whatever its body did.
fn classify(
    def: &TestDef,
    body: Body,
    cleanup: &CleanupSummary,
    leftovers: Option<String>,
    record: &mut TestRecord,
) {
    match (body, def.options.known_issue) {
        (Body::Skipped(reason), _) => {
            record.outcome = Outcome::Skipped;
            record.skip_reason = Some(reason);
        }
        (
            Body::NotRetried {
                kind,
                message,
                category,
            },
            _,
        ) => {
            record.fail(kind, message);
            record.categorize(category);
        }
        (
            Body::Failed {
                kind: kind @ (FailureKind::KnownIssueUnlisted | FailureKind::Config),
                message,
                ..
            },
            _,
        ) => {
            record.fail(kind, message);
        }
        (Body::Passed, None) => record.outcome = Outcome::Passed,
        (
            Body::Failed {
                kind,
                message,
                category,
            },
            None,
        ) => {
            record.fail(kind, message);
            if let Some(category) = category {
                record.categorize(category);
            }
        }
        // An intermittent bug that did not show this time: a pass, and the
        // summary says the issue was not reproduced.
        (Body::Passed, Some(_)) if def.options.intermittent => record.outcome = Outcome::Passed,
        (Body::Passed, Some(id)) => {
            record.outcome = Outcome::UnexpectedPass;
            record.failure_kind = Some(FailureKind::KnownIssueFixed);
            record.message = Some(format!(
                "known issue {id} appears fixed: the test passed but is pinned with `known_issue = \"{id}\"`; \
                 remove the marker from the test and the {id} entry from KNOWN-ISSUES.md"
            ));
        }
        (Body::Failed { message, .. }, Some(id)) => match def.options.fails_with {
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
    let problems: Vec<&str> = cleanup
        .failure
        .iter()
        .chain(leftovers.iter())
        .map(String::as_str)
        .collect();
    if !problems.is_empty() {
        let problem = problems.join("\n");
        let message = match record.message.take() {
            Some(body) if record.outcome != Outcome::ExpectedFailure => {
                format!("{problem}\n\nthe test body also failed: {body}")
            }
            _ => problem,
        };
        record.fail(FailureKind::Cleanup, message);
    }
    if let Some(problem) = &cleanup.fault_failure {
        // Its own kind, whatever else failed: the pod is not what the next
        // test expects, and the node says where to look.
        let message = match record.message.take() {
            Some(other) if record.outcome != Outcome::ExpectedFailure => {
                format!("{problem}\n\n{other}")
            }
            _ => problem.clone(),
        };
        record.fail(FailureKind::FaultNotUndone, message);
    }
    if let Some(message) = record.message.take() {
        record.message = Some(redact(&message).into_owned());
    }
}

/// What a test's error is the fault of: the infrastructure when anything
/// in its chain is an error of the container engine (a port it could not
/// publish among them), of the packet filter or of a node's network, or a
/// port or memory the machine could not give; the product otherwise (an
/// assertion, an answer the test did not accept).
fn category_of_error(error: &anyhow::Error) -> FailureCategory {
    if error.chain().any(is_infrastructure) {
        FailureCategory::Infrastructure
    } else {
        FailureCategory::Product
    }
}

/// Whether one error of a chain is the infrastructure's.
fn is_infrastructure(cause: &(dyn std::error::Error + 'static)) -> bool {
    use crate::engine::containers::{CommandError, EngineError, NetnsError, PacketFilterError};
    if let Some(failed) = cause.downcast_ref::<crate::tracker::InjectFailed>() {
        let mut inner: Option<&(dyn std::error::Error + 'static)> = Some(failed.cause());
        while let Some(e) = inner {
            if is_infrastructure(e) {
                return true;
            }
            inner = e.source();
        }
        return false;
    }
    cause.is::<EngineError>()
        || cause.is::<CommandError>()
        || cause.is::<PacketFilterError>()
        || cause.is::<NetnsError>()
        || cause.downcast_ref::<std::io::Error>().is_some_and(|e| {
            matches!(
                e.kind(),
                std::io::ErrorKind::AddrInUse
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::OutOfMemory
            )
        })
}

/// Under `[suite] retry = "infrastructure"`, a retry (nextest's attempt 2
/// and up) of a test whose attempt before it failed for anything but the
/// infrastructure does not run the test again: it fails as that attempt
/// did, saying why, so that no product bug passes on a retry. An attempt
/// before it that left no record (its process died) was the
/// infrastructure's, and is retried.
fn not_retried(def: &TestDef, run: &crate::engine::run::Run, attempt: u32) -> Option<Body> {
    if attempt < 2 {
        return None;
    }
    let policy = crate::globals::config().ok()?.suite.retry;
    if policy != RetryPolicy::Infrastructure {
        return None;
    }
    let name = def.full_name();
    let records = crate::engine::report::read_records(&run.results_dir).ok()?;
    let before = records.iter().find(|r| {
        r.run_id == run.id && r.binary == run.binary && r.name == name && r.attempt == attempt - 1
    })?;
    let category = before.category()?;
    if category == FailureCategory::Infrastructure {
        return None;
    }
    let why = before
        .message
        .as_deref()
        .and_then(|m| m.lines().next())
        .unwrap_or("failed");
    Some(Body::NotRetried {
        kind: before.failure_kind.unwrap_or(FailureKind::Error),
        message: format!(
            "not retried: attempt {} failed in the `{category}` category, and [suite] retry = \
             \"infrastructure\" reruns only what the infrastructure failed; attempt {}: {why}",
            attempt - 1,
            attempt - 1
        ),
        category,
    })
}
