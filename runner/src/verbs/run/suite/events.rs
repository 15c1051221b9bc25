//! Following the test command until it exits: nextest's libtest-json events
//! (kept in `tests.events.jsonl`) mark each listed test with its result, an
//! interrupt stops the command's process group (SIGINT, then SIGKILL on a
//! second one or after 60 s), and a terminal shows `done/total`.

use std::io::{IsTerminal, Write};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use testkit_engine::process;

use super::progress::{clear_progress, clock, progress_line};
use super::records::count_records;
use super::{Engine, Listed, TestsSpec};
use crate::verbs::run::signal::Interrupt;

/// How the test command ended.
pub(super) struct Followed {
    pub(super) status: ExitStatus,
    /// An interrupt arrived while it ran.
    pub(super) interrupted: bool,
}

/// Waits for `child` to exit, recording in `listed` the result nextest
/// reported for each test. `total` is how many tests the run selects, when
/// known. The error is the tests phase's evidence.
pub(super) async fn follow(
    spec: &TestsSpec<'_>,
    child: &mut tokio::process::Child,
    listed: &mut [Listed],
    total: Option<usize>,
    interrupt: &mut Interrupt,
    started: Instant,
) -> Result<Followed, String> {
    let events_path = spec.results_dir.join("tests.events.jsonl");
    let pgid = child.id().unwrap_or_default() as i32;

    // Events from nextest's stdout, on a thread of their own.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    if let Some(stdout) = child.stdout.take() {
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            let mut file = std::fs::File::create(&events_path).ok();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(f) = file.as_mut() {
                    let _ = writeln!(f, "{line}");
                }
                let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                    continue;
                };
                if v["type"] == "test" {
                    if let (Some(event), Some(name)) = (v["event"].as_str(), v["name"].as_str()) {
                        let _ = tx.send((name.to_owned(), event.to_owned()));
                    }
                }
            }
        });
    } else {
        drop(tx);
    }

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
                    process::signal_group(pgid, Signal::SIGKILL);
                }
            }
            _ = tick.tick() => {
                if interrupted_at.is_some_and(|t| t.elapsed() > Duration::from_secs(60)) {
                    eprintln!("testkit-runner: the tests did not stop within 60s of the interrupt: killing them");
                    process::signal_group(pgid, Signal::SIGKILL);
                    interrupted_at = None;
                }
                if tty {
                    let recorded = if spec.engine == Engine::CargoTest { count_records(spec.results_dir) } else { done };
                    let of = total.map(|t| format!("/{t}")).unwrap_or_default();
                    progress_line(&format!("tests: {recorded}{of} done, {}", clock(started.elapsed())));
                }
            }
        }
    };
    // Drain the events that arrived before the exit.
    while let Ok((name, event)) = rx.try_recv() {
        mark(listed, &name, event);
    }
    clear_progress();
    let status = status.map_err(|e| format!("failed to wait for the test command: {e}"))?;
    Ok(Followed {
        status,
        interrupted: seen > 0,
    })
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
