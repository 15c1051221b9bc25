//! Building the suite and starting its test command. Under nextest the
//! build is `cargo nextest list`, whose output also says which tests the run
//! selects; under `cargo test` it is `cargo test --no-run`. Both commands
//! run in a process group of their own, so an interrupt reaches every
//! process they start.

use std::ffi::OsString;
use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use testkit_engine::process;

use super::progress::{clock, progress_line};
use super::{describe_status, Engine, Listed, NextestListError, TestsIncomplete, TestsSpec};
use crate::verbs::run::signal::Interrupt;

fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The options of `cargo nextest run` that take a value as the next
/// argument: that value is no name filter (`--retries 1` selects every
/// test, not those with a `1` in their name).
const VALUE_OPTIONS: &[&str] = &[
    "--color",
    "-p",
    "--package",
    "--exclude",
    "--bin",
    "--example",
    "--test",
    "--bench",
    "-F",
    "--features",
    "--build-jobs",
    "--cargo-profile",
    "--target",
    "--target-dir",
    "--manifest-path",
    "--cargo-message-format",
    "--config",
    "-R",
    "--rerun",
    "--run-ignored",
    "--partition",
    "--platform-filter",
    "-E",
    "--filterset",
    "-j",
    "--test-threads",
    "--retries",
    "--flaky-result",
    "--max-fail",
    "--debugger",
    "--tracer",
    "--no-tests",
    "--stress-count",
    "--stress-duration",
    "--failure-output",
    "--success-output",
    "--status-level",
    "--final-status-level",
    "--show-progress",
    "--max-progress-running",
    "--message-format",
    "--message-format-version",
    "--config-file",
    "--user-config-file",
    "--tool-config-file",
    "-P",
    "--profile",
];

/// Options of `cargo nextest run` that select tests or builds them, and so
/// go to `cargo nextest list` too: the list is of the tests the run runs.
/// Those that take a value as the next argument…
const SELECTING_VALUE_OPTIONS: &[&str] = &[
    "-p",
    "--package",
    "--exclude",
    "--bin",
    "--example",
    "--test",
    "--bench",
    "-F",
    "--features",
    "--cargo-profile",
    "--target",
    "--target-dir",
    "--manifest-path",
    "--config",
    "--run-ignored",
    "--partition",
    "--platform-filter",
    "-E",
    "--filterset",
    "-P",
    "--profile",
    "--config-file",
    "--user-config-file",
    "--tool-config-file",
];

/// …and those that do not.
const SELECTING_FLAGS: &[&str] = &[
    "--lib",
    "--bins",
    "--tests",
    "--examples",
    "--benches",
    "--all-targets",
    "--workspace",
    "--all",
    "--all-features",
    "--no-default-features",
    "--ignore-default-filter",
    "--release",
    "-r",
    "--locked",
    "--frozen",
    "--offline",
    "--ignore-rust-version",
];

/// The part of `extra` (the arguments after the runner's `--`) that
/// `cargo nextest list` takes to list exactly the tests `cargo nextest
/// run` with them runs: the selecting options with their values, the name
/// filters (plain words, not the values of options), and the test binaries'
/// arguments after a second `--` (`--skip`, `--exact`). What only a run
/// takes (`--retries 1`, `-j 4`, `--no-capture`) is left out.
fn list_args(extra: &[String]) -> Vec<String> {
    let (before, after) = match extra.iter().position(|a| a == "--") {
        Some(i) => (&extra[..i], &extra[i..]),
        None => (extra, &[][..]),
    };
    let mut out = Vec::new();
    let mut args = before.iter();
    while let Some(arg) = args.next() {
        let name = arg.split_once('=').map_or(arg.as_str(), |(name, _)| name);
        let inline = arg.contains('=') && arg.starts_with("--");
        if SELECTING_VALUE_OPTIONS.contains(&name) {
            out.push(arg.clone());
            if !inline {
                out.extend(args.next().cloned());
            }
        } else if SELECTING_FLAGS.contains(&name) {
            out.push(arg.clone());
        } else if VALUE_OPTIONS.contains(&name) {
            if !inline {
                args.next();
            }
        } else if !arg.starts_with('-') {
            out.push(arg.clone());
        }
    }
    out.extend(after.iter().cloned());
    out
}

/// Options of `cargo test` that take a value as the next argument: cargo
/// takes them (and their values), not the test binaries.
const CARGO_TEST_VALUE_OPTIONS: &[&str] = &[
    "-p",
    "--package",
    "--exclude",
    "--test",
    "--bin",
    "--example",
    "--bench",
    "-F",
    "--features",
    "--target",
    "--target-dir",
    "--profile",
    "-j",
    "--jobs",
    "--manifest-path",
    "--message-format",
    "--color",
    "--config",
    "-Z",
    "--lockfile-path",
];

/// `extra` split as `cargo test` splits its arguments: cargo's own options
/// (with their values: `--test NAME`, `-p PKG`, `--lib`), the name filter
/// cargo hands every test binary, and the binaries' own arguments after
/// `--`.
struct CargoTestArgs {
    cargo: Vec<String>,
    filters: Vec<String>,
    binaries: Vec<String>,
}

fn split_cargo_test(extra: &[String]) -> CargoTestArgs {
    let (before, binaries) = match extra.iter().position(|a| a == "--") {
        Some(i) => (&extra[..i], extra[i + 1..].to_vec()),
        None => (extra, Vec::new()),
    };
    let mut split = CargoTestArgs {
        cargo: Vec::new(),
        filters: Vec::new(),
        binaries,
    };
    let mut args = before.iter();
    while let Some(arg) = args.next() {
        let name = arg.split_once('=').map_or(arg.as_str(), |(name, _)| name);
        if CARGO_TEST_VALUE_OPTIONS.contains(&name) {
            split.cargo.push(arg.clone());
            if !arg.contains('=') {
                split.cargo.extend(args.next().cloned());
            }
        } else if arg.starts_with('-') {
            split.cargo.push(arg.clone());
        } else {
            split.filters.push(arg.clone());
        }
    }
    split
}

fn base_command(spec: &TestsSpec<'_>) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(cargo());
    cmd.current_dir(spec.suite_dir)
        .stdin(Stdio::null())
        .kill_on_drop(false);
    // The runner may itself run under `cargo run` or nextest: what they set
    // for it must not steer the suite's engine, nor make the suite's build
    // see another environment than a build from a shell (which would
    // rebuild ring and everything above it, every run).
    for var in process::vars_set_by_cargo() {
        cmd.env_remove(var);
    }
    // Nor may a role testkit gives a binary reach every test process.
    for var in testkit_engine::settings::var::ROLES {
        cmd.env_remove(var);
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

/// Builds the suite (the compiler's output goes to `build.log`), and
/// returns the tests the run selects: nextest's list, or under `cargo test`
/// the list of every testkit binary cargo built.
/// The error is the tests phase's evidence.
pub(super) async fn build(
    spec: &TestsSpec<'_>,
    interrupt: &mut Interrupt,
) -> Result<Option<Vec<Listed>>, TestsIncomplete> {
    progress_line(&format!("tests: building {}", spec.suite_dir.display()));
    let build_log = spec.results_dir.join("build.log");
    let mut build = base_command(spec);
    match spec.engine {
        Engine::Nextest => {
            build.args(["nextest", "list", "--message-format", "json"]);
            build.args(selection_args(spec));
            build.args(list_args(spec.extra));
        }
        Engine::CargoTest => {
            build.args([
                "test",
                "--workspace",
                "--no-run",
                "--message-format",
                "json-render-diagnostics",
            ]);
            // cargo's own options select the binaries built, and listed;
            // the message format is the runner's to choose.
            let cargo = split_cargo_test(spec.extra).cargo;
            let mut cargo = cargo.iter();
            while let Some(arg) = cargo.next() {
                if arg == "--message-format" {
                    cargo.next();
                } else if !arg.starts_with("--message-format=") {
                    build.arg(arg);
                }
            }
        }
    }
    match capture(build, &build_log, interrupt).await {
        Err(e) => Err(TestsIncomplete::StartCargo(e)),
        Ok(Captured::Interrupted) => Err(TestsIncomplete::InterruptedBuilding),
        Ok(Captured::Done { status, stdout }) => {
            if !status.success() {
                return Err(TestsIncomplete::Build {
                    status: describe_status(status),
                    last: last_error(&build_log),
                    log: build_log,
                });
            }
            match spec.engine {
                Engine::Nextest => parse_list(&stdout)
                    .map(Some)
                    .map_err(TestsIncomplete::NextestList),
                Engine::CargoTest => list_cargo_test(spec, &stdout).await.map(Some),
            }
        }
    }
}

/// Starts the test command: under nextest with its libtest-json events on
/// stdout; its other output piped, for the runner to keep in `tests.log`
/// (or to the terminal with `--show-output`). Under nextest a failed test's
/// output is kept once, in its event: nextest is told not to print it
/// again. The error is the tests phase's evidence.
pub(super) fn start(spec: &TestsSpec<'_>) -> Result<tokio::process::Child, TestsIncomplete> {
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
            // nextest's exit status agrees with the suite on flaky tests
            // (the records decide the verdict either way).
            cmd.env("NEXTEST_FLAKY_RESULT", spec.flaky.as_str());
            if !spec.show_output {
                cmd.env("NEXTEST_FAILURE_OUTPUT", "never");
                cmd.env("NEXTEST_SUCCESS_OUTPUT", "never");
            }
            cmd.args(selection_args(spec));
            // `[suite] retries`, unless the run's own arguments say.
            let given = spec
                .extra
                .iter()
                .take_while(|a| *a != "--")
                .any(|a| a == "--retries" || a.starts_with("--retries="));
            if spec.retries > 0 && !given {
                cmd.args(["--retries", &spec.retries.to_string()]);
            }
        }
        Engine::CargoTest => {
            cmd.args(["test", "--workspace", "--no-fail-fast"]);
        }
    }
    cmd.args(spec.extra);
    let shown = |shown: bool| {
        if shown {
            Stdio::inherit()
        } else {
            Stdio::piped()
        }
    };
    cmd.stdout(shown(spec.engine == Engine::CargoTest && spec.show_output));
    cmd.stderr(shown(spec.show_output));
    let (child, pgid) = process::spawn_in_group(&mut cmd).map_err(TestsIncomplete::StartTests)?;
    // A runner that dies leaves no test process behind either.
    super::super::watch::also_end(pgid);
    Ok(child)
}

/// The tests `cargo nextest list --message-format json` selects, and those
/// it skips as ignored (their event `ignored` already).
fn parse_list(stdout: &[u8]) -> Result<Vec<Listed>, NextestListError> {
    let v: serde_json::Value = serde_json::from_slice(stdout)?;
    let suites = v["rust-suites"]
        .as_object()
        .ok_or(NextestListError::NoSuites)?;
    let mut out = Vec::new();
    for (binary_id, suite) in suites {
        let binary = suite["binary-name"]
            .as_str()
            .unwrap_or(binary_id)
            .to_owned();
        let binary_path = suite["binary-path"].as_str().map(std::path::PathBuf::from);
        let Some(cases) = suite["testcases"].as_object() else {
            continue;
        };
        for (name, case) in cases {
            let filter = &case["filter-match"];
            // An ignored test gets no process, and no event: it is listed
            // as ignored, so that a binary none of whose tests run is still
            // counted (a testkit binary records its own, with the reason,
            // when nextest lists it; a plain libtest one gets this).
            let event = match (filter["status"].as_str(), filter["reason"].as_str()) {
                (Some("matches"), _) => None,
                (_, Some("ignored")) => Some("ignored".to_owned()),
                _ => continue,
            };
            out.push(Listed {
                binary_id: binary_id.clone(),
                binary: binary.clone(),
                binary_path: binary_path.clone(),
                name: name.clone(),
                event,
                attempt: 1,
                ..Listed::default()
            });
        }
    }
    Ok(out)
}

/// The tests `cargo test` will run of each testkit binary that
/// `cargo test --no-run --message-format json` built: each binary's own
/// `--list`, with the run's name filters and binary arguments. Plain libtest
/// binaries report no records, so only testkit's are listed; a listed test
/// that then writes no record did not pass.
async fn list_cargo_test(
    spec: &TestsSpec<'_>,
    stdout: &[u8],
) -> Result<Vec<Listed>, TestsIncomplete> {
    let CargoTestArgs {
        filters,
        binaries: binary_args,
        ..
    } = split_cargo_test(spec.extra);
    let mut out = Vec::new();
    for line in stdout.split(|b| *b == b'\n') {
        let Ok(message) = serde_json::from_slice::<serde_json::Value>(line) else {
            continue;
        };
        if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
            continue;
        }
        let Some(exe) = message["executable"].as_str().map(std::path::PathBuf::from) else {
            continue;
        };
        match testkit_engine::report::is_testkit_binary(&exe) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(source) => return Err(TestsIncomplete::ReadBinary { exe, source }),
        }
        let dir = message["manifest_path"]
            .as_str()
            .and_then(|m| Path::new(m).parent())
            .map(Path::to_owned)
            .unwrap_or_else(|| spec.suite_dir.to_owned());
        let mut list = tokio::process::Command::new(&exe);
        list.args(["--list", "--format", "terse"])
            .args(&filters)
            .args(&binary_args)
            .current_dir(&dir)
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_os_str())))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let listed = match list.output().await {
            Ok(listed) => listed,
            Err(source) => return Err(TestsIncomplete::ListBinary { exe, source }),
        };
        if !listed.status.success() {
            return Err(TestsIncomplete::ListFailed {
                exe,
                status: describe_status(listed.status),
            });
        }
        let binary = testkit_engine::run::binary_name_of(&exe);
        for name in String::from_utf8_lossy(&listed.stdout)
            .lines()
            .filter_map(|l| l.strip_suffix(": test"))
        {
            out.push(Listed {
                binary_id: binary.clone(),
                binary: binary.clone(),
                binary_path: Some(exe.clone()),
                name: name.to_owned(),
                event: None,
                started_ms: None,
                ended_ms: None,
                attempt: 1,
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
    let (mut child, pgid) = process::spawn_in_group(&mut cmd)?;
    super::super::watch::also_end(pgid);
    let mut stdout = child.stdout.take().expect("piped");
    let reader = tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf).await;
        buf
    });
    let seen = interrupt.count();
    if seen > 0 {
        process::signal_group(pgid, Signal::SIGKILL);
    }
    let building = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            _ = interrupt.more_than(seen) => {
                process::signal_group(pgid, Signal::SIGKILL);
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

#[cfg(test)]
mod unit {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_list_takes_what_selects_tests_and_leaves_what_only_a_run_takes() {
        let args = strings(&[
            "create",
            "--retries",
            "1",
            "--no-capture",
            "-j",
            "4",
            "-E",
            "test(x)",
            "--filterset=binary(y)",
            "--max-fail=2",
            "-p",
            "suite",
            "list",
            "--",
            "--skip",
            "z",
        ]);
        assert_eq!(
            list_args(&args),
            strings(&[
                "create",
                "-E",
                "test(x)",
                "--filterset=binary(y)",
                "-p",
                "suite",
                "list",
                "--",
                "--skip",
                "z"
            ])
        );
    }

    #[test]
    fn cargo_test_options_go_to_cargo_and_not_to_the_test_binaries() {
        let split = split_cargo_test(&strings(&[
            "--test", "basics", "-p=suite", "--lib", "capab", "--", "--exact", "x",
        ]));
        assert_eq!(
            split.cargo,
            strings(&["--test", "basics", "-p=suite", "--lib"])
        );
        assert_eq!(split.filters, strings(&["capab"]));
        assert_eq!(split.binaries, strings(&["--exact", "x"]));
    }

    #[test]
    fn the_suite_build_does_not_inherit_what_cargo_set_for_the_runner() {
        // This test runs under cargo or nextest, which set these for it as
        // `cargo run` does for the runner.
        let spec = TestsSpec {
            suite_dir: Path::new("."),
            results_dir: Path::new("."),
            secrets_dir: Path::new("."),
            run_id: "r",
            engine: Engine::Nextest,
            archive: None,
            filters: &[],
            partition: None,
            extra: &[],
            env: vec![("TESTKIT_RUN_ID".to_owned(), "r".into())],
            show_output: false,
            flaky: testkit_engine::config::FlakyPolicy::Pass,
            retries: 0,
        };
        let cmd = base_command(&spec);
        let envs: Vec<_> = cmd.as_std().get_envs().collect();
        for var in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME"] {
            assert!(std::env::var_os(var).is_some(), "{var} is not set here");
            assert!(
                envs.contains(&(std::ffi::OsStr::new(var), None)),
                "{var} is inherited: {envs:?}"
            );
        }
        assert!(envs.contains(&(
            std::ffi::OsStr::new("TESTKIT_RUN_ID"),
            Some(std::ffi::OsStr::new("r"))
        )));
    }
}
