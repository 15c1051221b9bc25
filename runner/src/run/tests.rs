//! The tests phase: build the suite (a build failure leaves the compiler's
//! output in `build.log`), run it under `cargo nextest run`, `cargo test`, or
//! from a nextest archive, with progress on a terminal, then count the
//! outcomes from testkit's per-test records, cross-checked with what the test
//! engine said.
//!
//! Under nextest the runner lists the tests first (`cargo nextest list`, which
//! is also the build) and follows the run's libtest-json events, so a test
//! that left no record (its process crashed or was killed) is named and
//! counted as a failure, and progress shows `done/total`. Under `cargo test`
//! only the exit code can reveal a crashed binary.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use testkit::report::{self, KnownIssues, Summary};
use testkit::report::{Outcome, TestRecord};

use super::signal::Interrupt;
use super::verdict::{PhaseResult, Verdict};

/// The engine that runs the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Engine {
    /// `cargo nextest run` (or a nextest archive).
    Nextest,
    /// `cargo test`.
    CargoTest,
}

pub(crate) struct TestsSpec<'a> {
    pub(crate) suite_dir: &'a Path,
    pub(crate) results_dir: &'a Path,
    pub(crate) run_id: &'a str,
    pub(crate) engine: Engine,
    pub(crate) archive: Option<&'a Path>,
    pub(crate) filters: &'a [String],
    pub(crate) partition: Option<&'a str>,
    pub(crate) extra: &'a [String],
    pub(crate) env: Vec<(String, OsString)>,
    pub(crate) show_output: bool,
}

/// What the tests phase found.
pub(crate) struct TestsOutcome {
    pub(crate) result: PhaseResult,
    /// The run could not complete (build failed, the engine did not start).
    pub(crate) incomplete: bool,
    pub(crate) summary: Option<Summary>,
    /// `binary::name` and the first line of why, for every failed test.
    pub(crate) failures: Vec<(String, String)>,
}

/// A test nextest lists, and what its events said.
#[derive(Debug, Default, Clone)]
struct Listed {
    binary_id: String,
    binary: String,
    name: String,
    event: Option<String>,
}

fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The part of `extra` that selects tests by name for `cargo nextest list`:
/// the plain words before any `--`.
fn name_filters(extra: &[String]) -> Vec<String> {
    extra
        .iter()
        .take_while(|a| *a != "--")
        .filter(|a| !a.starts_with('-'))
        .cloned()
        .collect()
}

fn base_command(spec: &TestsSpec<'_>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(cargo());
    cmd.current_dir(spec.suite_dir)
        .stdin(Stdio::null())
        .process_group(0)
        .kill_on_drop(false);
    // The caller may itself run under nextest: its variables must not
    // steer the suite's engine.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("NEXTEST") {
            cmd.env_remove(&key);
        }
    }
    cmd.envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_os_str())));
    cmd
}

fn selection_args(spec: &TestsSpec<'_>) -> Vec<String> {
    let mut args = Vec::new();
    match spec.archive {
        Some(archive) => {
            args.push("--archive-file".to_owned());
            args.push(archive.display().to_string());
            args.push("--workspace-remap".to_owned());
            args.push(spec.suite_dir.display().to_string());
        }
        None => args.push("--workspace".to_owned()),
    }
    for f in spec.filters {
        args.push("-E".to_owned());
        args.push(f.clone());
    }
    if let Some(p) = spec.partition {
        args.push("--partition".to_owned());
        args.push(p.to_owned());
    }
    args
}

pub(crate) async fn run_tests(spec: &TestsSpec<'_>, interrupt: &mut Interrupt) -> TestsOutcome {
    let started = Instant::now();
    let phase =
        |verdict, evidence: String| PhaseResult::new("tests", verdict, evidence, started.elapsed());
    let incomplete = |evidence: String| TestsOutcome {
        result: PhaseResult::new("tests", Verdict::Fail, evidence, started.elapsed()),
        incomplete: true,
        summary: None,
        failures: Vec::new(),
    };

    // Build (and, under nextest, list).
    progress_line(&format!("tests: building {}", spec.suite_dir.display()));
    let build_log = spec.results_dir.join("build.log");
    let mut build = base_command(spec);
    match spec.engine {
        Engine::Nextest => {
            build.args(["nextest", "list", "--message-format", "json"]);
            build.args(selection_args(spec));
            build.args(name_filters(spec.extra));
        }
        Engine::CargoTest => {
            build.args(["test", "--workspace", "--no-run"]);
        }
    }
    let listed = match capture(build, &build_log, interrupt).await {
        Err(e) => return incomplete(format!("failed to start cargo: {e}")),
        Ok(Captured::Interrupted) => {
            return incomplete("interrupted while building the suite".to_owned())
        }
        Ok(Captured::Done { status, stdout }) => {
            if !status.success() {
                let last = last_error(&build_log);
                return incomplete(format!(
                    "the suite did not build ({}): {last}; compiler output in {}",
                    describe_status(status),
                    build_log.display()
                ));
            }
            match spec.engine {
                Engine::Nextest => match parse_list(&stdout) {
                    Ok(l) => Some(l),
                    Err(e) => return incomplete(format!("cannot read `cargo nextest list`: {e}")),
                },
                Engine::CargoTest => None,
            }
        }
    };
    clear_progress();
    if interrupt.requested() {
        return incomplete("interrupted before the tests started".to_owned());
    }

    // Run.
    let tests_log = spec.results_dir.join("tests.log");
    let mut cmd = base_command(spec);
    match spec.engine {
        Engine::Nextest => {
            cmd.args([
                "nextest",
                "run",
                "--no-fail-fast",
                "--message-format",
                "libtest-json",
            ]);
            cmd.env("NEXTEST_EXPERIMENTAL_LIBTEST_JSON", "1");
            cmd.args(selection_args(spec));
        }
        Engine::CargoTest => {
            cmd.args(["test", "--workspace", "--no-fail-fast"]);
        }
    }
    cmd.args(spec.extra);
    let log = match std::fs::File::create(&tests_log) {
        Ok(f) => f,
        Err(e) => return incomplete(format!("cannot create {}: {e}", tests_log.display())),
    };
    let events_path = spec.results_dir.join("tests.events.jsonl");
    match spec.engine {
        Engine::Nextest => {
            cmd.stdout(Stdio::piped());
        }
        Engine::CargoTest if spec.show_output => {
            cmd.stdout(Stdio::inherit());
        }
        Engine::CargoTest => {
            cmd.stdout(
                log.try_clone()
                    .map(Stdio::from)
                    .unwrap_or_else(|_| Stdio::null()),
            );
        }
    }
    if spec.show_output {
        cmd.stderr(Stdio::inherit());
    } else {
        cmd.stderr(log);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return incomplete(format!("failed to start the test command: {e}")),
    };
    let pgid = child.id().unwrap_or_default() as i32;
    let total = listed
        .as_ref()
        .map(|l| l.iter().filter(|t| t.event.is_none()).count());
    let mut listed = listed.unwrap_or_default();

    // Events from nextest's stdout, on a thread of their own.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    if let Some(stdout) = child.stdout.take() {
        let events_path = events_path.clone();
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
                if let Some(t) = listed.iter_mut().find(|t| format!("{}${}", t.binary_id, t.name) == name) {
                    if event != "started" {
                        t.event = Some(event);
                    }
                }
            }
            n = interrupt.more_than(seen) => {
                seen = n;
                if n == 1 {
                    let _ = killpg(Pid::from_raw(pgid), Signal::SIGINT);
                    interrupted_at = Some(Instant::now());
                } else {
                    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                }
            }
            _ = tick.tick() => {
                if interrupted_at.is_some_and(|t| t.elapsed() > Duration::from_secs(60)) {
                    eprintln!("testkit-runner: the tests did not stop within 60s of the interrupt: killing them");
                    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
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
        if let Some(t) = listed
            .iter_mut()
            .find(|t| format!("{}${}", t.binary_id, t.name) == name)
        {
            if event != "started" {
                t.event = Some(event);
            }
        }
    }
    clear_progress();
    let status = match status {
        Ok(s) => s,
        Err(e) => return incomplete(format!("failed to wait for the test command: {e}")),
    };
    let interrupted = seen > 0;

    // Count from the records.
    let mut records: Vec<TestRecord> = match report::read_records(spec.results_dir) {
        Ok(r) => r.into_iter().filter(|r| r.run_id == spec.run_id).collect(),
        Err(e) => return incomplete(format!("cannot read the test records: {e}")),
    };
    let have: BTreeSet<(String, String)> = records
        .iter()
        .map(|r| (r.binary.clone(), r.name.clone()))
        .collect();
    let mut crashed = Vec::new();
    for t in &listed {
        if have.contains(&(t.binary.clone(), t.name.clone())) {
            continue;
        }
        let synthetic = synthesize(spec, t, interrupted);
        if synthetic.outcome == Outcome::Failed {
            crashed.push(format!("{}::{}", t.binary, t.name));
        }
        write_record(spec.results_dir, &synthetic);
        records.push(synthetic);
    }
    let known = KnownIssues::load(spec.suite_dir).ok();
    let summary = Summary::from_records(&records, known.as_ref());
    if let Err(e) = report::write_junit(
        &report::junit_from_records(spec.run_id, &records),
        &spec.results_dir.join("junit.xml"),
    ) {
        eprintln!("testkit-runner: {e}");
    }
    let failures: Vec<(String, String)> = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed | Outcome::UnexpectedPass))
        .map(|r| {
            let why = r
                .message
                .as_deref()
                .and_then(|m| m.lines().next())
                .unwrap_or("failed")
                .to_owned();
            (format!("{}::{}", r.binary, r.name), why)
        })
        .collect();

    let counts = format!(
        "{} passed, {} failed, {} skipped, {} expected failures, {} unexpected passes",
        summary.passed,
        summary.failed,
        summary.skipped,
        summary.expected_failures,
        summary.unexpected_passes
    );
    let engine = match (spec.engine, spec.archive) {
        (Engine::Nextest, Some(_)) => "nextest archive",
        (Engine::Nextest, None) => "nextest",
        (Engine::CargoTest, _) => "cargo test",
    };
    let known_bad: Vec<String> = summary
        .known_issues
        .iter()
        .filter(|k| k.state.fails_run())
        .map(|k| format!("{} {}", k.id, k.state.describe()))
        .collect();
    let mut problems = Vec::new();
    if interrupted {
        problems.push("interrupted".to_owned());
    }
    if !crashed.is_empty() {
        problems.push(format!(
            "no record (process crashed or killed): {}",
            crashed.join(", ")
        ));
    }
    if !known_bad.is_empty() {
        problems.push(format!("known issues: {}", known_bad.join("; ")));
    }
    if summary.total() == 0 && !interrupted {
        problems.push("no test ran".to_owned());
    }
    let green = summary.is_green() && known_bad.is_empty();
    if !status.success() && green && crashed.is_empty() && !interrupted {
        problems.push(format!(
            "{engine} {} though every test record is green: a test binary crashed or the command failed; see {}",
            describe_status(status),
            tests_log.display()
        ));
    }
    let ok = green && problems.is_empty();
    let mut evidence = format!("{counts} ({engine}, {})", describe_status(status));
    if !problems.is_empty() {
        evidence.push_str("; ");
        evidence.push_str(&problems.join("; "));
    }
    TestsOutcome {
        result: phase(if ok { Verdict::Pass } else { Verdict::Fail }, evidence),
        incomplete: false,
        summary: Some(summary),
        failures,
    }
}

/// The record of a listed test that wrote none: a plain (non-testkit) test
/// takes nextest's word; anything else is a failure named as a crash.
fn synthesize(spec: &TestsSpec<'_>, t: &Listed, interrupted: bool) -> TestRecord {
    let (outcome, message, skip) = match t.event.as_deref() {
        Some("ok") => ("passed", None, None),
        Some("ignored") => ("skipped", None, Some("ignored (nextest)".to_owned())),
        Some(event) => (
            "failed",
            Some(format!(
                "no record: the test process crashed or was killed before it wrote one (nextest: {event}); see tests.log"
            )),
            None,
        ),
        None if interrupted => ("skipped", None, Some("not run: the run was interrupted".to_owned())),
        None => (
            "failed",
            Some("no record and no result: the test never reported (its binary crashed or was killed); see tests.log".to_owned()),
            None,
        ),
    };
    let value = serde_json::json!({
        "schema": testkit::report::RECORD_SCHEMA_VERSION,
        "run_id": spec.run_id,
        "binary": t.binary,
        "name": t.name,
        "description": "",
        "file": "",
        "line": 0,
        "outcome": outcome,
        "failure_kind": if outcome == "failed" { Some("error") } else { None },
        "message": message,
        "skip_reason": skip,
        "started_at_ms": 0,
        "duration_ms": 0,
        "known_issue": null,
        "fails_with": null,
        "requires": [],
        "capabilities_missing": [],
        "resources": [],
        "cleanup": "nothing",
        "output": "",
    });
    serde_json::from_value(value).expect("a record of the documented schema")
}

fn write_record(results_dir: &Path, record: &TestRecord) {
    let file: String = record
        .name
        .replace("::", "__")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = results_dir.join("records").join(&record.binary);
    let path = dir.join(format!("{file}.json"));
    let result = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            &path,
            serde_json::to_vec_pretty(record).expect("serializable"),
        )
    });
    if let Err(e) = result {
        eprintln!("testkit-runner: failed to write {}: {e}", path.display());
    }
}

/// Tests recorded so far: a line per test in each process's `.jsonl`, or a
/// `.json` file per test.
fn count_records(results_dir: &Path) -> usize {
    let Ok(dirs) = std::fs::read_dir(results_dir.join("records")) else {
        return 0;
    };
    dirs.filter_map(|d| d.ok())
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|files| files.filter_map(|f| f.ok()))
        .map(|f| {
            let path = f.path();
            match path.extension().and_then(|e| e.to_str()) {
                Some("json") => 1,
                Some("jsonl") => std::fs::read(&path)
                    .map(|b| b.iter().filter(|&&c| c == b'\n').count())
                    .unwrap_or(0),
                _ => 0,
            }
        })
        .sum()
}

/// The tests `cargo nextest list --message-format json` selects.
fn parse_list(stdout: &[u8]) -> Result<Vec<Listed>, String> {
    let v: serde_json::Value = serde_json::from_slice(stdout).map_err(|e| e.to_string())?;
    let suites = v["rust-suites"]
        .as_object()
        .ok_or("no `rust-suites` in its output")?;
    let mut out = Vec::new();
    for (binary_id, suite) in suites {
        let binary = suite["binary-name"]
            .as_str()
            .unwrap_or(binary_id)
            .to_owned();
        let Some(cases) = suite["testcases"].as_object() else {
            continue;
        };
        for (name, case) in cases {
            if case["filter-match"]["status"] != "matches" {
                continue;
            }
            out.push(Listed {
                binary_id: binary_id.clone(),
                binary: binary.clone(),
                name: name.clone(),
                event: None,
            });
        }
    }
    Ok(out)
}

enum Captured {
    Done {
        status: std::process::ExitStatus,
        stdout: Vec<u8>,
    },
    Interrupted,
}

/// Runs `cmd` with stdout captured and stderr to `log`; an interrupt kills it.
async fn capture(
    mut cmd: tokio::process::Command,
    log: &Path,
    interrupt: &mut Interrupt,
) -> std::io::Result<Captured> {
    let file = std::fs::File::create(log)?;
    cmd.stdout(Stdio::piped()).stderr(file);
    let mut child = cmd.spawn()?;
    let pgid = child.id().unwrap_or_default() as i32;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf).await;
        buf
    });
    let seen = interrupt.count();
    if seen > 0 {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
    let building = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            _ = interrupt.more_than(seen) => {
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                let _ = child.wait().await;
                return Ok(Captured::Interrupted);
            }
            _ = tick.tick() => {
                if std::io::stderr().is_terminal() {
                    progress_line(&format!("tests: building, {}", clock(building.elapsed())));
                }
            }
        }
    };
    let stdout = reader.await.unwrap_or_default();
    Ok(Captured::Done { status, stdout })
}

fn last_error(log: &Path) -> String {
    let Ok(file) = std::fs::File::open(log) else {
        return "no output".to_owned();
    };
    let lines: Vec<String> = std::io::BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .collect();
    lines
        .iter()
        .find(|l| l.starts_with("error"))
        .or_else(|| lines.iter().rev().find(|l| !l.trim().is_empty()))
        .map(|l| l.trim().chars().take(200).collect())
        .unwrap_or_else(|| "no output".to_owned())
}

pub(crate) fn describe_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => status.to_string(),
    }
}

/// `m:ss`.
pub(crate) fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

/// Rewrites the progress line on a terminal; nothing elsewhere.
pub(crate) fn progress_line(text: &str) {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K{text}");
        let _ = std::io::stderr().flush();
    }
}

pub(crate) fn clear_progress() {
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
        let _ = std::io::stderr().flush();
    }
}
