//! The hang report: what a test that timed out was waiting on when its
//! time ran out, said in its failure (its record's message, so JUnit and
//! `report.html` too) before its body is cancelled. The same report of
//! every test of the process in its body is given on demand: SIGUSR1 to
//! the process (the runner sends it on its own SIGUSR1), to stderr and to
//! `status/<pid>.txt` in the results folder.
//!
//! - how long it had been in its body, and in its step ([`Cx::step`]);
//! - each request in flight through the pod's client (method, URL, how
//!   long) and each wait pending (what for, how long, what it last saw);
//! - the faults it holds;
//! - for a pod of several nodes, each node's state (`running`, `paused`,
//!   `exited`) and its last 20 lines; the same of a pod that is one
//!   process group on this host, one container, or a machine (its state
//!   as QEMU has it, and the end of its journal or console).

use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::cx::CurrentStep;
use crate::engine::trace::pending;
use crate::tracker::HeldFaults;
#[cfg(doc)]
use crate::Cx;

/// How many lines of each node's output the report shows.
const NODE_LINES: usize = 20;

/// The longest the report may spend asking the engine about the nodes:
/// the report of a hang must not hang.
const NODES_WITHIN: Duration = Duration::from_secs(10);

/// The same bound for a report on demand, which the runner waits for
/// 5 s: its answer comes in time even when the engine does not.
const ASKED_POD_WITHIN: Duration = Duration::from_secs(3);

/// When a report is made.
#[derive(Clone, Copy)]
pub(super) enum When {
    /// The test's timeout ran out.
    TimedOut,
    /// Someone asked (SIGUSR1) while the test was in its body.
    Asked,
}

/// A test in its body: what a report on demand is about.
struct InBody {
    key: u64,
    name: String,
    started: Instant,
    trace: Option<u64>,
    held: HeldFaults,
    step: CurrentStep,
}

/// The tests of this process in their bodies now.
static IN_BODY: Mutex<Vec<InBody>> = Mutex::new(Vec::new());

/// Keeps a test listed as in its body until dropped.
pub(super) struct Listed(u64);

impl Drop for Listed {
    fn drop(&mut self) {
        let mut live = IN_BODY.lock().unwrap_or_else(PoisonError::into_inner);
        live.retain(|t| t.key != self.0);
    }
}

/// Lists the test `name` as in its body since `started`, for reports on
/// demand, until the returned guard is dropped.
pub(super) fn list_in_body(
    name: &str,
    started: Instant,
    trace: Option<u64>,
    held: HeldFaults,
    step: CurrentStep,
) -> Listed {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let key = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut live = IN_BODY.lock().unwrap_or_else(PoisonError::into_inner);
    live.push(InBody {
        key,
        name: name.to_owned(),
        started,
        trace,
        held,
        step,
    });
    Listed(key)
}

/// The report of every test of this process in its body now, each under
/// its name; says so when there is none.
async fn report_in_body() -> String {
    type Live = (String, Duration, Option<u64>, HeldFaults, CurrentStep);
    let live: Vec<Live> = IN_BODY
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|t| {
            let (name, held, step) = (t.name.clone(), t.held.clone(), t.step.clone());
            (name, t.started.elapsed(), t.trace, held, step)
        })
        .collect();
    let mut out = format!("testkit: test process {}: ", std::process::id());
    if live.is_empty() {
        out.push_str("no test is in its body\n");
        return out;
    }
    let _ = writeln!(out, "{} test(s) in their bodies", live.len());
    for (name, in_body, trace, held, step) in live {
        let said = test_part(When::Asked, in_body, trace, &held, &step);
        let _ = writeln!(out, "test {name}:\n{said}");
    }
    // The pod once for all of them, within what the runner waits for an
    // answer: each test's report asking the engine again would not be.
    let pod = pod_part(ASKED_POD_WITHIN).await;
    if !pod.is_empty() {
        let _ = writeln!(out, "the pod:{pod}");
    }
    crate::redact(&out).into_owned()
}

/// Installs the SIGUSR1 handler on the shared runtime: each SIGUSR1 writes
/// the report of every test of this process in its body to stderr and to
/// `status/<pid>.txt` in the run's results folder, where the runner reads
/// it. Call once, before tests run.
pub(super) fn install_status_handler() {
    let rt = crate::runtime::runtime();
    // Registered inside the runtime before this returns: SIGUSR1 no
    // longer ends the process.
    use tokio::signal::unix::{signal, SignalKind};
    let mut usr1 = match rt.block_on(async { signal(SignalKind::user_defined1()) }) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("testkit: could not install the SIGUSR1 handler ({e}); SIGUSR1 would end this process");
            return;
        }
    };
    rt.spawn(async move {
        while usr1.recv().await.is_some() {
            let report = report_in_body().await;
            {
                use std::io::Write as _;
                let _ = std::io::stderr().write_all(report.as_bytes());
            }
            let Ok(run) = crate::globals::run() else {
                continue;
            };
            let dir = run.results_dir.join(STATUS_DIR);
            let file = dir.join(format!("{}.txt", std::process::id()));
            // Whole or not at all: the runner never reads half a report.
            let written = std::fs::create_dir_all(&dir)
                .and_then(|()| crate::engine::files::write_private(&file, report.as_bytes()));
            if let Err(e) = written {
                eprintln!(
                    "testkit: could not write the SIGUSR1 report to {}: {e}",
                    file.display()
                );
            }
        }
    });
}

/// The results folder's subfolder of reports on demand.
const STATUS_DIR: &str = "status";

/// What the test whose trace is `trace` (every test of the process when
/// it has none) was waiting on, `in_body` into its body and in `step`,
/// then the pod's state; indented, to follow the timeout's first lines.
pub(super) async fn report(
    when: When,
    in_body: Duration,
    trace: Option<u64>,
    held: &HeldFaults,
    step: &CurrentStep,
) -> String {
    let test = test_part(when, in_body, trace, held, step);
    let pod = pod_part(NODES_WITHIN).await;
    crate::redact(&format!("{test}{pod}")).into_owned()
}

/// The test's own part of its report: how long it has been in its body
/// and its step, what it has in flight and pending, the faults it holds.
/// Read at once: it is what is pending now.
fn test_part(
    when: When,
    in_body: Duration,
    trace: Option<u64>,
    held: &HeldFaults,
    step: &CurrentStep,
) -> String {
    let pending = pending::now(trace);
    let faults = held.now();
    let when = match when {
        When::TimedOut => "when its time ran out",
        When::Asked => "when asked",
    };
    let mut out = format!(
        "  {when} it had been in its body for {:.1}s",
        in_body.as_secs_f64()
    );
    if let Some((name, since)) = step.now() {
        let _ = write!(out, ", in step `{name}` for {:.1}s", since.as_secs_f64());
    }
    if pending.is_empty() {
        out.push_str(", with no request in flight and no wait pending (it was computing, or awaiting something testkit does not see)");
    } else {
        out.push_str(", and was");
        for p in &pending {
            let _ = write!(out, "\n    {p}");
        }
    }
    if !faults.is_empty() {
        let _ = write!(out, "\n  faults held: {}", faults.join(", "));
    }
    out
}

/// The pod's part of a report ([`PodHandle::describe`]), each part
/// asked for within `bound`. Empty when there is no handle.
///
/// [`PodHandle::describe`]: crate::engine::pod::PodHandle::describe
async fn pod_part(bound: Duration) -> String {
    // The handle, not the pod: connecting could wait on a frozen node.
    match crate::globals::pod_handle() {
        Ok(handle) => handle.describe(NODE_LINES, bound).await,
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::config::SuiteConfig;
    use crate::engine::pod::{connect, HandlePolicy, PodHandle};
    use crate::engine::wait::{Check, Wait};

    /// A test hangs in a request to a frozen pod (its processes stopped, as
    /// a paused container's are) and in a wait that keeps seeing the same
    /// state: the report names the request with its method, URL and how
    /// long it has been in flight, and the wait with what it last saw.
    #[test]
    fn the_report_names_the_request_to_a_frozen_pod_and_the_wait_pending() {
        let sandboxd = test_support::Sandboxd::start(&[]);
        let config = SuiteConfig::default();
        let handle =
            PodHandle::parse(sandboxd.handle_json(), &HandlePolicy::from_suite(&config)).unwrap();
        let base = handle.base_url().to_owned();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let tracker = crate::tracker::Tracker::new("hang::t", None, crate::log::Log::default());
        let report = rt.block_on(async {
            let pod = connect(handle, &config, None).await.unwrap();
            let _frozen = sandboxd.freeze();
            let url = pod.url("/api/sandboxes?limit=1");
            // Sent again should it fail (a pooled connection the pod had
            // closed): the one that reaches the frozen pod stays pending.
            let request = tokio::spawn(async move {
                while pod.client().get(url.clone()).send().await.is_err() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            });
            let wait = tokio::spawn(Wait::new().inactivity(Duration::from_secs(3600)).run(
                "sandbox ct-hang-01 to be ready",
                || async { Ok(Check::<()>::pending("state=starting")) },
                |_| {},
            ));
            // Until both are pending: on a loaded machine the request may
            // take a while to be sent.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            let both = || {
                let now: Vec<String> = pending::now(None).iter().map(|p| p.to_string()).collect();
                now.iter().any(|p| p.contains("/api/sandboxes?limit=1"))
                    && now.iter().any(|p| p.contains("ct-hang-01"))
            };
            while !both() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let report = report(
                When::TimedOut,
                Duration::from_millis(500),
                None,
                &tracker.held_faults(),
                &CurrentStep::default(),
            )
            .await;
            request.abort();
            wait.abort();
            report
        });
        assert!(
            report.contains("in its body for 0.5s, and was")
                && report.contains(&format!(
                    "\n    request in flight: GET {base}/api/sandboxes?limit=1 for "
                ))
                && report.contains("\n    waiting for sandbox ct-hang-01 to be ready for ")
                && report.contains("; last saw: state=starting"),
            "{report}"
        );
        assert!(!report.contains("faults held"), "{report}");
    }
}
