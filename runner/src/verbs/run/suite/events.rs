//! Following the test command until it exits: nextest's libtest-json events
//! (kept in `tests.events.jsonl`, each capped by [`EventLine`]) mark each
//! listed test with its result, the engine's other output goes to
//! `tests.log` (capped by [`CappedLog`]), an interrupt stops the command's
//! process group (SIGINT, then SIGKILL to it and to every test process of
//! the run on a second one or after 60 s), and a terminal shows
//! `done/total`. What the runner holds of the output is bounded whatever
//! the tests print (see [`super::capped`]).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use testkit_engine::process;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::JoinSet;

use super::capped::{CappedLog, EventLine};
use super::progress::{clear_progress, clock, progress_line};
use super::records::count_records;
use super::{Engine, Listed, TestsSpec};
use crate::verbs::run::signal::Interrupt;

/// How long the output the command left in its pipes may take to be read
/// once it exited: a process a test left running may hold them open.
const DRAIN: Duration = Duration::from_secs(5);

/// How the test command ended.
pub(super) struct Followed {
    pub(super) status: ExitStatus,
    /// An interrupt arrived while it ran.
    pub(super) interrupted: bool,
}

/// A test's event: its name (`<binary id>$<test name>`) and what happened
/// (`started`, `ok`, `failed`, `ignored`, …).
type TestEvent = (String, String);

/// Waits for `child` to exit, recording in `listed` the result nextest
/// reported for each test, and keeping its output in `tests_log`; a
/// terminal shows `progress`. The error is the tests phase's evidence.
pub(super) async fn follow(
    spec: &TestsSpec<'_>,
    child: &mut tokio::process::Child,
    tests_log: Option<CappedLog>,
    progress: Progress,
    listed: &mut [Listed],
    interrupt: &mut Interrupt,
) -> Result<Followed, super::TestsIncomplete> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<TestEvent>();
    let (mut readers, log) = read_output(spec, child, tests_log, tx);
    let watched = watch(spec, child, progress, listed, &mut rx, interrupt).await;
    // Read what the command left in its pipes, within bounds.
    let _ = tokio::time::timeout(DRAIN, async {
        while readers.join_next().await.is_some() {}
    })
    .await;
    readers.abort_all();
    // Aborted readers let go of the log once joined.
    while readers.join_next().await.is_some() {}
    if let Some(log) = log.and_then(|l| Arc::try_unwrap(l).ok()) {
        log.into_inner().unwrap_or_else(|e| e.into_inner()).finish();
    }
    while let Ok((name, event)) = rx.try_recv() {
        mark(listed, &name, event);
    }
    clear_progress();
    let (status, interrupted) = watched;
    let status = status.map_err(super::TestsIncomplete::WaitTests)?;
    Ok(Followed {
        status,
        interrupted,
    })
}

/// What the progress line shows: how many tests the run selects, when
/// known, and since when the phase runs.
pub(super) struct Progress {
    pub(super) total: Option<usize>,
    pub(super) started: Instant,
}

/// Starts reading the command's output: nextest's events from its stdout,
/// everything else into the capped `tests.log`.
fn read_output(
    spec: &TestsSpec<'_>,
    child: &mut tokio::process::Child,
    tests_log: Option<CappedLog>,
    tx: UnboundedSender<TestEvent>,
) -> (JoinSet<()>, Option<Arc<Mutex<CappedLog>>>) {
    let mut readers = JoinSet::new();
    let log = tests_log.map(|l| Arc::new(Mutex::new(l)));
    if let Some(stdout) = child.stdout.take() {
        match (spec.engine, &log) {
            (Engine::Nextest, log) => {
                let events_path = events_file(spec.results_dir);
                readers.spawn(read_events(stdout, events_path, log.clone(), tx));
            }
            (Engine::CargoTest, Some(log)) => {
                readers.spawn(copy_into(stdout, Arc::clone(log)));
            }
            (Engine::CargoTest, None) => {}
        }
    }
    if let (Some(stderr), Some(log)) = (child.stderr.take(), &log) {
        readers.spawn(copy_into(stderr, Arc::clone(log)));
    }
    (readers, log)
}

/// Copies `from` into the capped log until it ends.
async fn copy_into(mut from: impl AsyncRead + Unpin, log: Arc<Mutex<CappedLog>>) {
    let mut buf = vec![0u8; 64 << 10];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        log.lock()
            .unwrap_or_else(|e| e.into_inner())
            .write(&buf[..n]);
    }
}

/// Reads nextest's libtest-json events from `stdout` as they arrive, each
/// line capped as it is read, keeps them in `events_path`, and sends each
/// test's event on `tx`. A line that is no JSON (a test's own output, under
/// `--no-capture`) goes to the capped `log` instead, so that the events
/// file grows by at most a capped event per test.
async fn read_events(
    mut stdout: impl AsyncRead + Unpin,
    events_path: std::path::PathBuf,
    log: Option<Arc<Mutex<CappedLog>>>,
    tx: UnboundedSender<TestEvent>,
) {
    let mut file = std::fs::File::create(&events_path)
        .ok()
        .map(std::io::BufWriter::new);
    let mut line = EventLine::default();
    let mut buf = vec![0u8; 64 << 10];
    let mut done = |line: &mut EventLine| {
        let mut kept = line.finish();
        kept.push(b'\n');
        let json = serde_json::from_slice::<serde::de::IgnoredAny>(&kept).is_ok();
        match (json, file.as_mut(), &log) {
            (true, Some(f), _) => {
                let _ = f.write_all(&kept).and_then(|()| f.flush());
            }
            (false, _, Some(log)) => log.lock().unwrap_or_else(|e| e.into_inner()).write(&kept),
            _ => {}
        }
        if let Some(event) = test_event(&kept) {
            let _ = tx.send(event);
        }
    };
    while let Ok(n @ 1..) = stdout.read(&mut buf).await {
        let mut chunk = &buf[..n];
        while let Some(end) = chunk.iter().position(|&b| b == b'\n') {
            line.feed(&chunk[..end]);
            done(&mut line);
            chunk = &chunk[end + 1..];
        }
        line.feed(chunk);
    }
    if !line.is_empty() {
        done(&mut line);
    }
}

/// The test and what happened to it, from one event line; `None` for any
/// other line.
fn test_event(line: &[u8]) -> Option<TestEvent> {
    #[derive(serde::Deserialize)]
    struct Event {
        #[serde(rename = "type")]
        kind: Option<String>,
        event: Option<String>,
        name: Option<String>,
    }
    let event: Event = serde_json::from_slice(line).ok()?;
    match event {
        Event {
            kind: Some(kind),
            event: Some(event),
            name: Some(name),
        } if kind == "test" => Some((name, event)),
        _ => None,
    }
}

/// Waits for the command to exit, marking each test's event as it comes,
/// stopping the command on an interrupt, and showing progress on a
/// terminal. Returns its exit status and whether an interrupt arrived.
async fn watch(
    spec: &TestsSpec<'_>,
    child: &mut tokio::process::Child,
    progress: Progress,
    listed: &mut [Listed],
    rx: &mut UnboundedReceiver<TestEvent>,
    interrupt: &mut Interrupt,
) -> (std::io::Result<ExitStatus>, bool) {
    let pgid = child.id().unwrap_or_default() as i32;
    let tty = std::io::stderr().is_terminal() && !spec.show_output;
    let mut done = 0usize;
    let mut seen = interrupt.count();
    let mut interrupted_at: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            Some((name, event)) = rx.recv() => {
                if event != "started" {
                    done += 1;
                }
                mark(listed, &name, event);
            }
            n = interrupt.more_than(seen) => {
                seen = n;
                if n == 1 {
                    process::signal_group(pgid, Signal::SIGINT);
                    interrupted_at = Some(Instant::now());
                } else {
                    kill_tests(pgid, spec.run_id);
                }
            }
            _ = tick.tick() => {
                if interrupted_at.is_some_and(|t| t.elapsed() > Duration::from_secs(60)) {
                    eprintln!("testkit-runner: the tests did not stop within 60s of the interrupt: killing them");
                    kill_tests(pgid, spec.run_id);
                    interrupted_at = None;
                }
                if tty {
                    show_progress(spec, &progress, done);
                }
            }
        }
    };
    (status, seen > 0)
}

fn show_progress(spec: &TestsSpec<'_>, progress: &Progress, done: usize) {
    let recorded = if spec.engine == Engine::CargoTest {
        count_records(spec.results_dir)
    } else {
        done
    };
    let of = progress.total.map(|t| format!("/{t}")).unwrap_or_default();
    progress_line(&format!(
        "tests: {recorded}{of} done, {}",
        clock(progress.started.elapsed())
    ));
}

/// The first lines of `tests.log`: what it holds, and where the output it
/// does not hold is.
pub(super) fn log_header(engine: Engine) -> String {
    use super::capped::{LOG_CAP, OUTPUT_CAP};
    let mib = |b: usize| b >> 20;
    match engine {
        Engine::Nextest => format!(
            "testkit-runner: nextest's own output. The output of each failed test is kept once, \
             in tests.events.jsonl (the `stdout` of its `failed` event): up to {} MiB of it, its \
             head and tail around a `… N bytes dropped …` marker. This file keeps its first and \
             last {} MiB.\n",
            mib(OUTPUT_CAP),
            mib(LOG_CAP / 2)
        ),
        Engine::CargoTest => format!(
            "testkit-runner: cargo test's output and the tests'. This file keeps its first and \
             last {} MiB, around a `… N bytes dropped …` marker.\n",
            mib(LOG_CAP / 2)
        ),
    }
}

/// The file that keeps nextest's events, capped.
pub(super) fn events_file(results_dir: &Path) -> std::path::PathBuf {
    results_dir.join("tests.events.jsonl")
}

/// Kills the test command's group and every test process of run `run_id`:
/// nextest starts each test in a process group of its own, which a signal
/// to its group misses, and a test process left running would go on
/// cleaning up beside the residue sweep. The reapers (`TESTKIT_RUN_AS`)
/// are spared: they delete what the killed processes held.
fn kill_tests(pgid: i32, run_id: &str) {
    use testkit_engine::settings::var;
    process::signal_group(pgid, Signal::SIGKILL);
    let tests = process::with_env_without(var::RUN_ID, run_id, var::RUN_AS);
    process::signal_each(&tests, Signal::SIGKILL);
}

/// Records a test's result event (`ok`, `failed`, `ignored`, …), and when
/// it started and ended, on the listed test nextest names
/// `<binary id>$<test name>`, and `…#N` for the result of its Nth attempt
/// when it retried the test.
fn mark(listed: &mut [Listed], name: &str, event: String) {
    let (name, attempt) = split_attempt(name);
    let Some(t) = listed
        .iter_mut()
        .find(|t| format!("{}${}", t.binary_id, t.name) == name)
    else {
        return;
    };
    let now = testkit_engine::resource::journal::now_ms();
    if event == "started" {
        t.started_ms = Some(now);
    } else {
        t.ended_ms = Some(now);
        t.event = Some(event);
        t.attempt = attempt;
    }
}

/// `bin$test#2` → (`bin$test`, 2); a name without an attempt is attempt 1.
/// (A Rust test name never holds `#`.)
fn split_attempt(name: &str) -> (&str, u32) {
    match name.rsplit_once('#') {
        Some((test, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            (test, n.parse().unwrap_or(1))
        }
        _ => (name, 1),
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn events_are_kept_capped_and_other_lines_go_to_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("tests.events.jsonl");
        let log_path = dir.path().join("tests.log");
        let log = Arc::new(Mutex::new(CappedLog::create(&log_path, "").unwrap()));
        let output = "z".repeat(5 << 20);
        let failed =
            serde_json::json!({"type": "test", "event": "failed", "name": "b$t", "stdout": output});
        let input = format!(
            "{{\"type\":\"test\",\"event\":\"started\",\"name\":\"b$t\"}}\nnot an event, a test's own line\n{failed}\n"
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(read_events(
            input.as_bytes(),
            events.clone(),
            Some(Arc::clone(&log)),
            tx,
        ));
        Arc::try_unwrap(log)
            .ok()
            .unwrap()
            .into_inner()
            .unwrap()
            .finish();
        let got: Vec<TestEvent> = std::iter::from_fn(|| rx.try_recv().ok()).collect();
        assert_eq!(
            got,
            [
                ("b$t".to_owned(), "started".to_owned()),
                ("b$t".to_owned(), "failed".to_owned())
            ]
        );
        let kept = std::fs::read_to_string(&events).unwrap();
        assert_eq!(kept.lines().count(), 2, "{kept:.200}");
        assert!(
            kept.len() < super::super::capped::OUTPUT_CAP + 1000,
            "{}",
            kept.len()
        );
        assert!(kept.contains(&format!(
            "… {} bytes dropped …",
            (5 << 20) - super::super::capped::OUTPUT_CAP
        )));
        assert_eq!(
            std::fs::read_to_string(&log_path).unwrap(),
            "not an event, a test's own line\n"
        );
    }

    #[test]
    fn a_retrys_event_marks_the_listed_test_with_its_attempt() {
        let mut listed = vec![Listed {
            binary_id: "pkg::flaky".into(),
            name: "flaky::fails_once".into(),
            attempt: 1,
            ..Listed::default()
        }];
        mark(&mut listed, "pkg::flaky$flaky::fails_once#2", "ok".into());
        assert_eq!(listed[0].event.as_deref(), Some("ok"));
        assert_eq!(listed[0].attempt, 2);
        mark(&mut listed, "pkg::flaky$flaky::fails_once", "failed".into());
        assert_eq!(
            (listed[0].event.as_deref(), listed[0].attempt),
            (Some("failed"), 1)
        );
        assert_eq!(split_attempt("a$b#x"), ("a$b#x", 1));
    }
}
