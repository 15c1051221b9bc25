//! Settings: every environment variable testkit reads, read once per process
//! and validated once.
//!
//! A value that does not parse is an error naming the variable and what it
//! expects; the harness fails every test with it rather than guessing. A
//! path is checked against what it must name: a handle file that is there,
//! a suite folder that is there, a results or secrets folder (or nothing
//! yet, never a file). The
//! lookup is injectable (`Settings::from_lookup`) so that the rules are
//! tested without touching the process environment.
//!
//! | variable | meaning |
//! | --- | --- |
//! | `TESTKIT_RUN_ID` | the run's id (else derived from `NEXTEST_RUN_ID`, else generated) |
//! | `TESTKIT_RESULTS_DIR` | the run's results folder |
//! | `TESTKIT_SUITE_DIR` | the suite's workspace root (where `testkit.toml` is) |
//! | `TESTKIT_POD_HANDLE` | a pod handle file |
//! | `TESTKIT_SECRETS_DIR` | where the run keeps live credentials (not the results folder) |
//! | `TESTKIT_TEST_THREADS` | concurrency when `--test-threads` is not given |
//! | `TESTKIT_TIMEOUT` | the default test timeout (from 1ms to 24h) |
//! | `TESTKIT_GRACE` | how long cleanup may take after SIGINT/SIGTERM (from 1ms to 24h) |
//! | `TESTKIT_BUDGET_WAIT` | how long a test waits for a budget slot while none of its kind is freed (from 1ms to 24h) |
//! | `TESTKIT_KEEP` | `never`, `on-failure` or `always` |
//! | `TESTKIT_KEEP_PROCESSES` | `never`, `on-failure` or `always`: keep the processes a test left running |
//! | `TESTKIT_CLI` | the CLI program, overriding `[cli] program` |
//! | `TESTKIT_CHROMIUM` | the Chromium program for browser tests (else `chromium` on PATH) |
//! | `TESTKIT_INSTALL` | `auto` (the default) or `never`: whether a missing Chromium or cargo-nextest is installed (see [`crate::install`]) |
//! | `TESTKIT_BROWSER` | `on` (the default) or `off`: browser tests are skipped, saying so |
//! | `TESTKIT_BROWSER_TEARDOWN` | how long ending a test's browser may take before it is killed (from 1ms to 24h) |
//! | `TESTKIT_TRACE` | `off`, `retain-on-failure` (the default) or `on`: which tests keep their trace |
//! | `TESTKIT_RUN_AS` | set by testkit on a test binary it starts as a reaper |
//! | `TESTKIT_REAPER_JOURNAL`, `TESTKIT_REAPER_PARENT` | what that reaper watches |
//! | `TESTKIT_SWEEP_KINDS` | the Rust kinds a test binary started as a sweeper sweeps |
//! | `TESTKIT_PROCESS_TAG` | set by the harness on itself: every process a test starts inherits it |
//! | `TESTKIT_PODS_DIR` | where `testkit-runner` records the pods it starts (else `$XDG_STATE_HOME/testkit/pods`) |
//! | `TESTKIT_SWEEP_DEADLINE` | how long `testkit-runner run`'s residue sweep may take (from 1s to 24h) |
//! | `TESTKIT_SOURCES` | which testkit sources `testkit-runner` uses: a checkout's folder, or `none` for the registry (else the checkout it was built from, while it is there) |
//! | `TESTKIT_MACHINE_CACHE` | where machine images are cached (else `$XDG_CACHE_HOME/testkit/machines`, else `$HOME/.cache/testkit/machines`) |
//!
//! Cargo's and nextest's variables that testkit reads are here too:
//! `CARGO_MANIFEST_DIR`, `CARGO_TARGET_DIR`, `NEXTEST`, `NEXTEST_RUN_ID`,
//! `NEXTEST_ATTEMPT`, and the user's `XDG_RUNTIME_DIR`, `XDG_STATE_HOME`,
//! `XDG_CACHE_HOME` and `HOME`. What is only handed on to programs testkit starts (`PATH`,
//! `CARGO`, `CARGO_HOME`) is read where they are started: it is the
//! process's plumbing, not a setting of testkit.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The names of the variables, for the runner and tests that set them.
pub mod var {
    /// The run's id.
    pub const RUN_ID: &str = "TESTKIT_RUN_ID";
    /// The run's results folder.
    pub const RESULTS_DIR: &str = "TESTKIT_RESULTS_DIR";
    /// The suite's workspace root.
    pub const SUITE_DIR: &str = "TESTKIT_SUITE_DIR";
    /// A pod handle file.
    pub const POD_HANDLE: &str = "TESTKIT_POD_HANDLE";
    /// Concurrency when `--test-threads` is not given.
    pub const TEST_THREADS: &str = "TESTKIT_TEST_THREADS";
    /// The default test timeout.
    pub const TIMEOUT: &str = "TESTKIT_TIMEOUT";
    /// Cleanup's time after SIGINT/SIGTERM.
    pub const GRACE: &str = "TESTKIT_GRACE";
    /// How long a test waits for a budget slot while none is freed.
    pub const BUDGET_WAIT: &str = "TESTKIT_BUDGET_WAIT";
    /// Which tests keep their trace.
    pub const TRACE: &str = "TESTKIT_TRACE";
    /// Keep resources for debugging.
    pub const KEEP: &str = "TESTKIT_KEEP";
    /// Keep the processes a test left running, for debugging.
    pub const KEEP_PROCESSES: &str = "TESTKIT_KEEP_PROCESSES";
    /// Set by a test process on itself, unique to it: every process its
    /// tests start inherits it, which finds those left running, wherever
    /// they went (a session of their own, orphaned to init).
    pub const PROCESS_TAG: &str = "TESTKIT_PROCESS_TAG";
    /// The CLI program.
    pub const CLI: &str = "TESTKIT_CLI";
    /// The Chromium program for browser tests.
    pub const CHROMIUM: &str = "TESTKIT_CHROMIUM";
    /// `never`: a missing Chromium or cargo-nextest is not installed
    /// (default `auto`: it is, where it can be; see [`crate::install`]).
    pub const INSTALL: &str = "TESTKIT_INSTALL";
    /// `off` turns the browser phase off: browser tests are skipped.
    pub const BROWSER: &str = "TESTKIT_BROWSER";
    /// The cap on ending one test's browsers.
    pub const BROWSER_TEARDOWN: &str = "TESTKIT_BROWSER_TEARDOWN";
    /// What a test binary runs as, when testkit starts it for another job.
    pub const RUN_AS: &str = "TESTKIT_RUN_AS";
    /// The journal a reaper watches over.
    pub const REAPER_JOURNAL: &str = "TESTKIT_REAPER_JOURNAL";
    /// The test process a reaper watches.
    pub const REAPER_PARENT: &str = "TESTKIT_REAPER_PARENT";
    /// Where the run keeps its live credentials.
    pub const SECRETS_DIR: &str = "TESTKIT_SECRETS_DIR";
    /// The Rust kinds a sweeper sweeps, comma-separated.
    pub const SWEEP_KINDS: &str = "TESTKIT_SWEEP_KINDS";
    /// Where `testkit-runner` records the pods it starts.
    pub const PODS_DIR: &str = "TESTKIT_PODS_DIR";
    /// How long `testkit-runner run`'s residue sweep may take.
    pub const SWEEP_DEADLINE: &str = "TESTKIT_SWEEP_DEADLINE";
    /// Where machine images are cached.
    pub const MACHINE_CACHE: &str = "TESTKIT_MACHINE_CACHE";
    /// Which testkit sources `testkit-runner` uses: a checkout's folder,
    /// or `none` for the registry.
    pub const SOURCES: &str = "TESTKIT_SOURCES";

    /// The variables testkit sets itself on a test binary it starts in
    /// another role (reaper, sweeper): never handed on from a caller's
    /// environment, where they would turn every test process into one.
    pub const ROLES: &[&str] = &[RUN_AS, REAPER_JOURNAL, REAPER_PARENT, SWEEP_KINDS];
}

/// A test's timeout when its attribute gives none and `TESTKIT_TIMEOUT` is
/// unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// How long cleanup may take after a signal, unless `TESTKIT_GRACE` says.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// How long ending a test's browsers may take, unless
/// `TESTKIT_BROWSER_TEARDOWN` says: past it they are killed, and the test
/// fails with `browser teardown timed out`.
pub const DEFAULT_BROWSER_TEARDOWN: Duration = Duration::from_secs(10);

/// How long a test waits for a budget slot while no slot of its kind is
/// freed, unless `TESTKIT_BUDGET_WAIT` says: then it fails, naming who
/// holds them. Half of nextest's usual slow-test kill, so that a deadlock
/// says what it is before that kill does.
pub const DEFAULT_BUDGET_WAIT: Duration = Duration::from_secs(60);

/// How long `testkit-runner run`'s residue sweep may take, unless
/// `TESTKIT_SWEEP_DEADLINE` says.
pub const DEFAULT_SWEEP_DEADLINE: Duration = Duration::from_secs(120);

/// The bounds of `TESTKIT_SWEEP_DEADLINE`: a sweep of less than a second
/// could not list a pod's resources.
pub const SWEEP_DEADLINE_BOUNDS: crate::duration::Bounds =
    crate::duration::Bounds::new(Duration::from_secs(1), crate::duration::DAY);

/// `TESTKIT_INSTALL`: whether a missing program testkit needs (Chromium,
/// cargo-nextest) is installed where it can be (see [`crate::install`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Install {
    /// Installed where it can be (the default).
    #[default]
    Auto,
    /// Never installed: the error names the command to run.
    Never,
}

/// `TESTKIT_KEEP`: whether a test's resources are kept for debugging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Keep {
    /// Delete and verify everything (the default).
    #[default]
    Never,
    /// Keep what a test whose body failed created.
    OnFailure,
    /// Keep everything.
    Always,
}

/// What a test binary runs as.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RunAs {
    /// The test harness (the default).
    #[default]
    Harness,
    /// The reaper of another test process: deletes what that process's
    /// journal says is left when the process dies without cleaning up.
    Reaper {
        /// The journal to read.
        journal: PathBuf,
        /// The test process's pid, for messages.
        parent: String,
    },
    /// A sweeper for `testkit-runner`: sweeps the run's resources of the
    /// suite's Rust kinds, which the runner cannot link, and prints what it
    /// did as JSON.
    Sweeper {
        /// The kinds to sweep.
        kinds: Vec<String>,
    },
}

/// Every setting of this process.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Settings {
    /// `TESTKIT_RUN_ID`, validated.
    pub run_id: Option<String>,
    /// `NEXTEST_RUN_ID`: every process of a nextest run shares it.
    pub nextest_run_id: Option<String>,
    /// `NEXTEST` is set: each test is a process of its own.
    pub under_nextest: bool,
    /// `NEXTEST_ATTEMPT`: 1 for the first try, 2 and up for retries.
    pub nextest_attempt: Option<u32>,
    /// `TESTKIT_RESULTS_DIR`.
    pub results_dir: Option<PathBuf>,
    /// `TESTKIT_SUITE_DIR`.
    pub suite_dir: Option<PathBuf>,
    /// `CARGO_MANIFEST_DIR`, which cargo and nextest set for test processes.
    pub manifest_dir: Option<PathBuf>,
    /// `CARGO_TARGET_DIR`.
    pub target_dir: Option<PathBuf>,
    /// `XDG_RUNTIME_DIR`, when it is an absolute path.
    pub runtime_dir: Option<PathBuf>,
    /// `TESTKIT_POD_HANDLE`.
    pub pod_handle: Option<PathBuf>,
    /// `TESTKIT_SECRETS_DIR`.
    pub secrets_dir: Option<PathBuf>,
    /// `TESTKIT_TEST_THREADS`, a positive integer.
    pub test_threads: Option<usize>,
    /// `TESTKIT_TIMEOUT`, else [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// `TESTKIT_GRACE`, else [`DEFAULT_GRACE`].
    pub grace: Duration,
    /// `TESTKIT_KEEP`.
    pub keep: Keep,
    /// `TESTKIT_KEEP_PROCESSES`.
    pub keep_processes: Keep,
    /// `TESTKIT_CLI`.
    pub cli: Option<String>,
    /// `TESTKIT_RUN_AS` and what goes with it.
    pub run_as: RunAs,
    /// `TESTKIT_CHROMIUM`.
    pub chromium: Option<String>,
    /// `TESTKIT_BROWSER=off`: browser tests are skipped with that reason.
    pub browser_off: bool,
    /// `TESTKIT_BROWSER_TEARDOWN`, else [`DEFAULT_BROWSER_TEARDOWN`].
    pub browser_teardown: Duration,
    /// `TESTKIT_BUDGET_WAIT`, else [`DEFAULT_BUDGET_WAIT`].
    pub budget_wait: Duration,
    /// `TESTKIT_TRACE`, else [`TracePolicy::RetainOnFailure`].
    pub trace: TracePolicy,
    /// `TESTKIT_INSTALL`.
    pub install: Install,
    /// `TESTKIT_PODS_DIR`, as given (the runner proves it can write there).
    pub pods_dir: Option<PathBuf>,
    /// `TESTKIT_SWEEP_DEADLINE`, else [`DEFAULT_SWEEP_DEADLINE`].
    pub sweep_deadline: Duration,
    /// `XDG_STATE_HOME`.
    pub state_home: Option<PathBuf>,
    /// `TESTKIT_MACHINE_CACHE`.
    pub machine_cache: Option<PathBuf>,
    /// `XDG_CACHE_HOME`.
    pub cache_home: Option<PathBuf>,
    /// `HOME`.
    pub home: Option<PathBuf>,
    /// The role variables ([`var::ROLES`]) that are set, with their values:
    /// testkit sets them on a binary it starts as a reaper or a sweeper, so
    /// the runner refuses them in its own environment.
    pub roles: Vec<(&'static str, OsString)>,
}

/// Which tests keep their trace (`TESTKIT_TRACE`). Every test records
/// unless it is off, and a failed one keeps its trace by default: a
/// traced request costs a copy of its head (bench/README.md measures it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TracePolicy {
    /// Nothing is recorded.
    Off,
    /// Every test records; a failed one keeps it.
    #[default]
    RetainOnFailure,
    /// Every test records and keeps it.
    On,
}

impl TracePolicy {
    /// `off`, `retain-on-failure` or `on`.
    pub fn parse(text: &str) -> Option<TracePolicy> {
        match text {
            "off" => Some(TracePolicy::Off),
            "retain-on-failure" => Some(TracePolicy::RetainOnFailure),
            "on" => Some(TracePolicy::On),
            _ => None,
        }
    }
}

/// One or more variables hold values testkit cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    problems: Vec<String>,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.problems.join("; "))
    }
}

impl std::error::Error for SettingsError {}

impl Settings {
    /// The settings with nothing set: for code that must go on (a reaper, a
    /// cleanup) where the harness already reported why the real ones are
    /// unusable.
    pub fn defaults() -> Settings {
        Settings {
            timeout: DEFAULT_TIMEOUT,
            grace: DEFAULT_GRACE,
            browser_teardown: DEFAULT_BROWSER_TEARDOWN,
            budget_wait: DEFAULT_BUDGET_WAIT,
            sweep_deadline: DEFAULT_SWEEP_DEADLINE,
            ..Settings::default()
        }
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<Settings, SettingsError> {
        Settings::from_lookup(|name| std::env::var_os(name))
    }

    /// Reads settings through `lookup` (a variable's value, or `None`).
    /// An empty value counts as unset.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Settings, SettingsError> {
        let get = |name: &str| lookup(name).filter(|v| !v.is_empty());
        let mut problems = Vec::new();
        let raw = Raw::read(&get, &mut problems);
        let mut check = Check { problems };
        let run_id = check.run_id(raw.run_id);
        let nextest_attempt = check.nextest_attempt(raw.attempt);
        let test_threads = check.test_threads(raw.threads);
        let timeout = check.duration(var::TIMEOUT, raw.timeout, DEFAULT_TIMEOUT);
        let grace = check.duration(var::GRACE, raw.grace, DEFAULT_GRACE);
        let browser_teardown = check.duration(
            var::BROWSER_TEARDOWN,
            raw.browser_teardown,
            DEFAULT_BROWSER_TEARDOWN,
        );
        let budget_wait = check.duration(var::BUDGET_WAIT, raw.budget_wait, DEFAULT_BUDGET_WAIT);
        let browser_off = check.browser_off(raw.browser);
        let trace = check.trace(raw.trace);
        let install = check.install(raw.install);
        let sweep_deadline = check.sweep_deadline(raw.sweep_deadline);
        let keep = check.keep(var::KEEP, raw.keep);
        let keep_processes = check.keep(var::KEEP_PROCESSES, raw.keep_processes);
        let run_as = check.run_as(raw.run_as, raw.parent, &get);
        // A reaper or a sweeper cleans up whatever is left: a path gone
        // since (the run's handle, once the run ended) is no reason for it
        // to give up, so the paths are checked for the harness only.
        let path = |check: &mut Check, name: &str, want: Want| match run_as {
            RunAs::Harness => check.path(name, get(name), want),
            _ => get(name).map(PathBuf::from),
        };
        let results_dir = path(&mut check, var::RESULTS_DIR, Want::Folder);
        let suite_dir = path(&mut check, var::SUITE_DIR, Want::Suite);
        let pod_handle = path(&mut check, var::POD_HANDLE, Want::File);
        let secrets_dir = path(&mut check, var::SECRETS_DIR, Want::Folder);
        if !check.problems.is_empty() {
            return Err(SettingsError {
                problems: check.problems,
            });
        }
        Ok(Settings {
            run_id,
            nextest_run_id: raw.nextest_run_id,
            under_nextest: get("NEXTEST").is_some(),
            nextest_attempt,
            results_dir,
            suite_dir,
            manifest_dir: get("CARGO_MANIFEST_DIR").map(PathBuf::from),
            target_dir: get("CARGO_TARGET_DIR").map(PathBuf::from),
            runtime_dir: get("XDG_RUNTIME_DIR")
                .map(PathBuf::from)
                .filter(|d| d.is_absolute()),
            pod_handle,
            secrets_dir,
            test_threads,
            timeout,
            grace,
            keep,
            keep_processes,
            cli: raw.cli,
            run_as,
            chromium: raw.chromium,
            browser_off,
            browser_teardown,
            budget_wait,
            trace,
            install,
            pods_dir: get(var::PODS_DIR).map(PathBuf::from),
            sweep_deadline,
            state_home: get("XDG_STATE_HOME").map(PathBuf::from),
            machine_cache: get(var::MACHINE_CACHE).map(PathBuf::from),
            cache_home: get("XDG_CACHE_HOME").map(PathBuf::from),
            home: get("HOME").map(PathBuf::from),
            roles: var::ROLES
                .iter()
                .filter_map(|role| Some((*role, get(role)?)))
                .collect(),
        })
    }
}

/// The variables that must be text, read first (so that one that is not
/// UTF-8 is reported before what is wrong with the others), trimmed.
struct Raw {
    run_id: Option<String>,
    nextest_run_id: Option<String>,
    attempt: Option<String>,
    threads: Option<String>,
    timeout: Option<String>,
    grace: Option<String>,
    keep: Option<String>,
    keep_processes: Option<String>,
    cli: Option<String>,
    run_as: Option<String>,
    parent: Option<String>,
    chromium: Option<String>,
    browser: Option<String>,
    browser_teardown: Option<String>,
    budget_wait: Option<String>,
    trace: Option<String>,
    install: Option<String>,
    sweep_deadline: Option<String>,
}

impl Raw {
    fn read(get: &dyn Fn(&str) -> Option<OsString>, problems: &mut Vec<String>) -> Raw {
        let mut text = |name: &str| -> Option<String> {
            match get(name)?.into_string() {
                Ok(s) => Some(s.trim().to_owned()),
                Err(raw) => {
                    problems.push(format!("{name}={raw:?} is not valid UTF-8"));
                    None
                }
            }
        };
        Raw {
            run_id: text(var::RUN_ID),
            nextest_run_id: text("NEXTEST_RUN_ID"),
            attempt: text("NEXTEST_ATTEMPT"),
            threads: text(var::TEST_THREADS),
            timeout: text(var::TIMEOUT),
            grace: text(var::GRACE),
            keep: text(var::KEEP),
            keep_processes: text(var::KEEP_PROCESSES),
            cli: text(var::CLI),
            run_as: text(var::RUN_AS),
            parent: text(var::REAPER_PARENT),
            chromium: text(var::CHROMIUM),
            browser: text(var::BROWSER),
            browser_teardown: text(var::BROWSER_TEARDOWN),
            budget_wait: text(var::BUDGET_WAIT),
            trace: text(var::TRACE),
            install: text(var::INSTALL),
            sweep_deadline: text(var::SWEEP_DEADLINE),
        }
    }
}

/// What a path variable must name.
#[derive(Clone, Copy)]
enum Want {
    /// A folder, or nothing yet (it is made): never a file.
    Folder,
    /// The suite's root: a folder that is there.
    Suite,
    /// A file that is there (a pod handle: never "no handle, so the
    /// default pod").
    File,
}

/// Validates the values of [`Raw`], collecting every problem: a value that
/// is wrong gives its default here and fails the whole read.
struct Check {
    problems: Vec<String>,
}

impl Check {
    fn bad(&mut self, name: &str, value: &str, expected: &str) {
        self.problems
            .push(format!("{name}={value:?} is invalid: {expected}"));
    }

    /// A path variable, checked against what it must name (it is only
    /// looked at: nothing is made here).
    fn path(&mut self, name: &str, value: Option<OsString>, want: Want) -> Option<PathBuf> {
        let path = PathBuf::from(value?);
        let shown = path.to_string_lossy().into_owned();
        let meta = std::fs::metadata(&path);
        let problem = match (want, &meta) {
            (Want::Folder, Ok(m)) if !m.is_dir() => {
                Some("it is not a folder: give a folder (made if missing), or unset it")
            }
            (Want::Folder, _) => None,
            (Want::Suite, Ok(m)) if m.is_dir() => None,
            (Want::Suite, _) => Some(
                "it is not a folder that is there: give the suite's root, where testkit.toml \
                 is, or unset it",
            ),
            (Want::File, Ok(m)) if m.is_file() => None,
            (Want::File, _) => Some(
                "it is not a file that is there: give a pod handle file (`testkit-runner pod \
                 up` prints one), or unset it to run without a pod",
            ),
        };
        if let Some(expected) = problem {
            let why = match &meta {
                Err(e) => format!("{e}; {expected}"),
                Ok(_) => expected.to_owned(),
            };
            self.bad(name, &shown, &why);
        }
        Some(path)
    }

    fn run_id(&mut self, run_id: Option<String>) -> Option<String> {
        if let Some(id) = &run_id {
            if let Err(why) = crate::ids::validate_run_id(id) {
                self.bad(var::RUN_ID, id, why);
            }
        }
        run_id
    }

    fn nextest_attempt(&mut self, attempt: Option<String>) -> Option<u32> {
        let a = attempt?;
        match a.parse::<u32>() {
            Ok(n) => Some(n),
            Err(_) => {
                self.bad("NEXTEST_ATTEMPT", &a, "expected a positive integer");
                None
            }
        }
    }

    fn test_threads(&mut self, threads: Option<String>) -> Option<usize> {
        let t = threads?;
        match t.parse::<usize>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                self.bad(
                    var::TEST_THREADS,
                    &t,
                    "expected a positive integer, such as 16",
                );
                None
            }
        }
    }

    /// A timeout or a grace: zero cannot be meant, and a day is the most
    /// (see [`crate::duration::TIMEOUT`]).
    fn duration(&mut self, name: &str, value: Option<String>, default: Duration) -> Duration {
        let Some(v) = value else {
            return default;
        };
        crate::duration::TIMEOUT.parse(&v).unwrap_or_else(|e| {
            self.bad(name, &v, &e.to_string());
            default
        })
    }

    fn trace(&mut self, trace: Option<String>) -> TracePolicy {
        let Some(text) = trace else {
            return TracePolicy::default();
        };
        TracePolicy::parse(&text).unwrap_or_else(|| {
            self.bad(
                var::TRACE,
                &text,
                "expected `off`, `retain-on-failure` or `on`",
            );
            TracePolicy::default()
        })
    }

    fn install(&mut self, install: Option<String>) -> Install {
        match install.as_deref() {
            None | Some("auto") => Install::Auto,
            Some("never") => Install::Never,
            Some(other) => {
                self.bad(
                    var::INSTALL,
                    other,
                    "expected `auto` (the default: install what is missing) or `never`",
                );
                Install::Auto
            }
        }
    }

    /// From a second to a day ([`SWEEP_DEADLINE_BOUNDS`]).
    fn sweep_deadline(&mut self, value: Option<String>) -> Duration {
        let Some(v) = value else {
            return DEFAULT_SWEEP_DEADLINE;
        };
        SWEEP_DEADLINE_BOUNDS.parse(&v).unwrap_or_else(|e| {
            self.bad(var::SWEEP_DEADLINE, &v, &e.to_string());
            DEFAULT_SWEEP_DEADLINE
        })
    }

    fn browser_off(&mut self, browser: Option<String>) -> bool {
        match browser.as_deref() {
            None | Some("on") => false,
            Some("off") => true,
            Some(other) => {
                self.bad(var::BROWSER, other, "expected `on` or `off`");
                false
            }
        }
    }

    fn keep(&mut self, name: &str, value: Option<String>) -> Keep {
        match value.as_deref() {
            None | Some("never") => Keep::Never,
            Some("on-failure") => Keep::OnFailure,
            Some("always") => Keep::Always,
            Some(other) => {
                self.bad(name, other, "expected `never`, `on-failure` or `always`");
                Keep::Never
            }
        }
    }

    fn run_as(
        &mut self,
        run_as: Option<String>,
        parent: Option<String>,
        get: &dyn Fn(&str) -> Option<OsString>,
    ) -> RunAs {
        match run_as.as_deref() {
            None => RunAs::Harness,
            Some("sweeper") => RunAs::Sweeper {
                kinds: get(var::SWEEP_KINDS)
                    .and_then(|k| k.into_string().ok())
                    .map(|k| {
                        k.split(',')
                            .map(str::trim)
                            .filter(|k| !k.is_empty())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            Some("reaper") => match get(var::REAPER_JOURNAL) {
                Some(journal) => RunAs::Reaper {
                    journal: PathBuf::from(journal),
                    parent: parent.unwrap_or_default(),
                },
                None => {
                    self.bad(
                        var::RUN_AS,
                        "reaper",
                        "it needs TESTKIT_REAPER_JOURNAL as well",
                    );
                    RunAs::Harness
                }
            },
            Some(other) => {
                self.bad(
                    var::RUN_AS,
                    other,
                    "expected `reaper` or `sweeper` (testkit sets it; unset it to run tests)",
                );
                RunAs::Harness
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::Path;

    fn read(vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(*v)))
            .collect();
        Settings::from_lookup(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let s = read(&[]).unwrap();
        assert_eq!(s.timeout, DEFAULT_TIMEOUT);
        assert_eq!(s.grace, DEFAULT_GRACE);
        assert_eq!(s.keep, Keep::Never);
        assert_eq!(s.run_as, RunAs::Harness);
        assert_eq!(s.browser_teardown, DEFAULT_BROWSER_TEARDOWN);
        assert!(!s.browser_off && s.chromium.is_none());
        assert!(s.run_id.is_none() && s.test_threads.is_none() && !s.under_nextest);
    }

    #[test]
    fn values_parse() {
        let s = read(&[
            (var::RUN_ID, "abc123"),
            (var::TEST_THREADS, " 16 "),
            (var::TIMEOUT, "90s"),
            (var::GRACE, "2s"),
            (var::KEEP, "on-failure"),
            ("NEXTEST", "1"),
            ("NEXTEST_ATTEMPT", "2"),
            (var::RUN_AS, "reaper"),
            (var::REAPER_JOURNAL, "/r/j.jsonl"),
            (var::REAPER_PARENT, "42"),
            (var::CHROMIUM, "/opt/chromium/chrome"),
            (var::BROWSER, "off"),
            (var::BROWSER_TEARDOWN, "3s"),
        ])
        .unwrap();
        assert_eq!(s.run_id.as_deref(), Some("abc123"));
        assert_eq!(s.test_threads, Some(16));
        assert_eq!(s.timeout, Duration::from_secs(90));
        assert_eq!(s.grace, Duration::from_secs(2));
        assert_eq!(s.keep, Keep::OnFailure);
        assert!(s.under_nextest);
        assert_eq!(s.nextest_attempt, Some(2));
        assert_eq!(s.chromium.as_deref(), Some("/opt/chromium/chrome"));
        assert!(s.browser_off);
        assert_eq!(s.browser_teardown, Duration::from_secs(3));
        assert_eq!(
            s.run_as,
            RunAs::Reaper {
                journal: PathBuf::from("/r/j.jsonl"),
                parent: "42".into()
            }
        );
    }

    #[test]
    fn every_bad_value_is_named_with_what_it_expects() {
        let e = read(&[
            (var::RUN_ID, "Not-Ok"),
            (var::TEST_THREADS, "0"),
            (var::TIMEOUT, "soon"),
            (var::GRACE, "-1"),
            (var::KEEP, "sometimes"),
            (var::RUN_AS, "janitor"),
            (var::BROWSER, "maybe"),
            (var::BROWSER_TEARDOWN, "later"),
        ])
        .unwrap_err()
        .to_string();
        for needle in [
            "TESTKIT_RUN_ID=\"Not-Ok\" is invalid: it must contain only lowercase",
            "TESTKIT_TEST_THREADS=\"0\" is invalid: expected a positive integer",
            "TESTKIT_TIMEOUT=\"soon\" is invalid: it is not a duration",
            "give a duration from 1ms to 24h",
            "TESTKIT_GRACE=\"-1\"",
            "TESTKIT_KEEP=\"sometimes\" is invalid: expected `never`, `on-failure` or `always`",
            "TESTKIT_RUN_AS=\"janitor\"",
            "TESTKIT_BROWSER=\"maybe\" is invalid: expected `on` or `off`",
            "TESTKIT_BROWSER_TEARDOWN=\"later\" is invalid",
        ] {
            assert!(e.contains(needle), "{needle:?} missing from: {e}");
        }
        let e = read(&[(var::RUN_AS, "reaper")]).unwrap_err().to_string();
        assert!(e.contains("TESTKIT_REAPER_JOURNAL"), "{e}");
    }

    #[test]
    fn path_variables_name_what_they_must_be() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("handle.json");
        std::fs::write(&file, "{}").unwrap();
        let (d, f) = (dir.path().to_str().unwrap(), file.to_str().unwrap());
        let s = read(&[
            (var::POD_HANDLE, f),
            (var::SUITE_DIR, d),
            (var::RESULTS_DIR, "/not/yet/made"),
            (var::SECRETS_DIR, d),
        ])
        .unwrap();
        assert_eq!(s.pod_handle.as_deref(), Some(file.as_path()));
        assert_eq!(s.results_dir.as_deref(), Some(Path::new("/not/yet/made")));
        let e = read(&[
            (var::POD_HANDLE, "/nonexistent.json"),
            (var::SUITE_DIR, "/nonexistent"),
            (var::RESULTS_DIR, f),
            (var::SECRETS_DIR, f),
        ])
        .unwrap_err()
        .to_string();
        for needle in [
            "TESTKIT_POD_HANDLE=\"/nonexistent.json\" is invalid: No such file",
            "give a pod handle file",
            "TESTKIT_SUITE_DIR=\"/nonexistent\" is invalid",
            "give the suite's root",
            &format!("TESTKIT_RESULTS_DIR={f:?} is invalid: it is not a folder"),
            &format!("TESTKIT_SECRETS_DIR={f:?} is invalid: it is not a folder"),
        ] {
            assert!(e.contains(needle), "{needle:?} missing from: {e}");
        }
        let e = read(&[(var::POD_HANDLE, d)]).unwrap_err().to_string();
        assert!(e.contains("it is not a file that is there"), "{e}");
        // A reaper goes on whatever became of the paths.
        let s = read(&[
            (var::RUN_AS, "reaper"),
            (var::REAPER_JOURNAL, "/r/j.jsonl"),
            (var::POD_HANDLE, "/nonexistent.json"),
        ])
        .unwrap();
        assert_eq!(
            s.pod_handle.as_deref(),
            Some(Path::new("/nonexistent.json"))
        );
    }

    #[test]
    fn timeouts_and_graces_are_more_than_zero_and_at_most_a_day() {
        for name in [var::TIMEOUT, var::GRACE, var::BROWSER_TEARDOWN] {
            for (value, reason) in [
                ("0s", "it is zero"),
                ("5000000000000000h", "it is longer than 24h"),
                ("25h", "it is longer than 24h"),
            ] {
                let e = read(&[(name, value)]).unwrap_err().to_string();
                assert_eq!(
                    e,
                    format!(
                        "{name}={value:?} is invalid: {reason}; give a duration from 1ms to \
                         24h, such as 30s or 5m"
                    )
                );
            }
            let s = read(&[(name, "24h")]).unwrap();
            let day = crate::duration::DAY;
            assert!(
                [s.timeout, s.grace, s.browser_teardown].contains(&day),
                "{name}=24h is the longest allowed: {s:?}"
            );
        }
    }

    #[test]
    fn empty_values_are_unset() {
        let s = read(&[(var::TIMEOUT, ""), (var::RESULTS_DIR, "")]).unwrap();
        assert_eq!(s.timeout, DEFAULT_TIMEOUT);
        assert!(s.results_dir.is_none());
    }

    #[test]
    fn the_budget_wait_is_a_duration_with_a_default() {
        assert_eq!(read(&[]).unwrap().budget_wait, DEFAULT_BUDGET_WAIT);
        let s = read(&[(var::BUDGET_WAIT, "3s")]).unwrap();
        assert_eq!(s.budget_wait, Duration::from_secs(3));
        let e = read(&[(var::BUDGET_WAIT, "ever")]).unwrap_err().to_string();
        assert!(e.contains("TESTKIT_BUDGET_WAIT=\"ever\""), "{e}");
    }

    #[test]
    fn the_install_opt_out_is_never_and_nothing_else_is_silently_taken() {
        assert_eq!(read(&[]).unwrap().install, Install::Auto);
        assert_eq!(
            read(&[(var::INSTALL, "auto")]).unwrap().install,
            Install::Auto
        );
        assert_eq!(
            read(&[(var::INSTALL, "never")]).unwrap().install,
            Install::Never
        );
        let e = read(&[(var::INSTALL, "no")]).unwrap_err().to_string();
        assert!(
            e.contains("TESTKIT_INSTALL=\"no\" is invalid") && e.contains("`never`"),
            "{e}"
        );
    }

    #[test]
    fn the_sweep_deadline_is_a_duration_from_a_second_to_a_day() {
        assert_eq!(read(&[]).unwrap().sweep_deadline, DEFAULT_SWEEP_DEADLINE);
        assert_eq!(
            read(&[(var::SWEEP_DEADLINE, " 90s ")])
                .unwrap()
                .sweep_deadline,
            Duration::from_secs(90)
        );
        for bad in ["soon", "0s", "500ms", "25h", "5000000000000000h"] {
            let e = read(&[(var::SWEEP_DEADLINE, bad)]).unwrap_err().to_string();
            assert!(
                e.contains(&format!("TESTKIT_SWEEP_DEADLINE={bad:?} is invalid")),
                "{e}"
            );
        }
    }

    #[test]
    fn the_roles_set_are_named_with_their_values() {
        assert!(read(&[]).unwrap().roles.is_empty());
        let s = read(&[(var::RUN_AS, "sweeper"), (var::SWEEP_KINDS, "sandbox")]).unwrap();
        assert_eq!(
            s.roles,
            [
                (var::RUN_AS, OsString::from("sweeper")),
                (var::SWEEP_KINDS, OsString::from("sandbox"))
            ]
        );
    }

    #[test]
    fn trace_policy_defaults_to_retain_on_failure_and_rejects_other_words() {
        assert_eq!(read(&[]).unwrap().trace, TracePolicy::RetainOnFailure);
        assert_eq!(
            read(&[(var::TRACE, "off")]).unwrap().trace,
            TracePolicy::Off
        );
        assert_eq!(read(&[(var::TRACE, "on")]).unwrap().trace, TracePolicy::On);
        assert_eq!(
            read(&[(var::TRACE, "retain-on-failure")]).unwrap().trace,
            TracePolicy::RetainOnFailure
        );
        let e = read(&[(var::TRACE, "always")]).unwrap_err().to_string();
        assert!(
            e.contains("TESTKIT_TRACE=\"always\" is invalid: expected `off`"),
            "{e}"
        );
    }
}
