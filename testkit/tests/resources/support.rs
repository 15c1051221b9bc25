//! Real pods and real fixture runs for the resource tests.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg};
use nix::unistd::Pid;
use testkit_engine::pod::{HandlePolicy, PodHandle};

pub const PREFIX: &str = "ct";

/// The fixture suite's directory.
pub fn suite_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/resources-suite")
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // The target dir this test binary was built in: shared with the
    // fixture so nothing is built twice.
    c.env("CARGO_TARGET_DIR", test_support::target_dir());
    // What nextest sets for this test process: its profile would be
    // looked for in the fixture's config, which has no `ci`.
    for var in testkit_engine::process::vars_set_by_cargo() {
        c.env_remove(var);
    }
    // What cargo sets for this test process (package metadata, the manifest
    // dir, ...) would reach build scripts that watch the environment and
    // make the two builds rebuild each other's dependencies.
    for (var, _) in std::env::vars_os() {
        let var = var.to_string_lossy().into_owned();
        if (var.starts_with("CARGO_") || var.starts_with("RUST") || var == "OUT_DIR")
            && var != "CARGO_HOME"
            && var != "CARGO_TARGET_DIR"
            && var != "RUSTUP_HOME"
            && var != "RUSTUP_TOOLCHAIN"
        {
            c.env_remove(var);
        }
    }
    for var in [
        "TESTKIT_POD_HANDLE",
        "TESTKIT_RUN_ID",
        "TESTKIT_RESULTS_DIR",
        "TESTKIT_SUITE_DIR",
        "TESTKIT_KEEP",
        "NEXTEST_RUN_ID",
    ] {
        c.env_remove(var);
    }
    c
}

/// Builds sandboxd and the fixture suite once; sandboxd's executable.
pub fn built() -> &'static Path {
    static FIXTURE: OnceLock<()> = OnceLock::new();
    let sandboxd = test_support::sandboxd_bin();
    FIXTURE.get_or_init(|| {
        let status = cargo()
            .current_dir(suite_dir())
            .args(["test", "-q", "--no-run"])
            .status()
            .unwrap();
        assert!(status.success(), "building the fixture suite failed");
    });
    sandboxd
}

/// A running `sandboxd` with its own HOME, stopped on drop.
pub struct Sandboxd {
    pod: test_support::Sandboxd,
    pub home: PathBuf,
    pub handle_file: PathBuf,
    pub handle_json: String,
}

impl Sandboxd {
    pub fn start(faults: &[&str]) -> Sandboxd {
        built();
        Sandboxd::from(test_support::Sandboxd::start(&serve_args(faults)))
    }

    /// Starts on an existing HOME (a restart keeps the sandboxes).
    pub fn start_in(home: &Path, faults: &[&str]) -> Sandboxd {
        built();
        Sandboxd::from(test_support::Sandboxd::start_in(home, &serve_args(faults)))
    }

    fn from(pod: test_support::Sandboxd) -> Sandboxd {
        Sandboxd {
            home: pod.home().to_owned(),
            handle_file: pod.handle_file().to_owned(),
            handle_json: pod.handle_json().to_owned(),
            pod,
        }
    }

    /// What the pod logged so far (every request it answered).
    pub fn log_text(&self) -> String {
        self.pod.log_text()
    }

    /// Stops the pod and waits for its process group to drain.
    pub fn stop(&mut self) {
        self.pod.stop();
    }

    /// A connected client, as the runner would have.
    pub async fn connect(&self) -> testkit_engine::pod::Pod {
        let handle = PodHandle::parse(&self.handle_json, &HandlePolicy::default()).unwrap();
        testkit_engine::pod::connect(
            handle,
            &testkit_engine::config::SuiteConfig::default(),
            None,
        )
        .await
        .unwrap()
    }
}

/// `serve` arguments: a token window longer than any test, and `faults`.
fn serve_args<'a>(faults: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--token-window", "30m"];
    for fault in faults {
        args.extend(["--fault", fault]);
    }
    args
}

/// The names of a run the pod lists.
pub async fn listed(pod: &testkit_engine::pod::Pod, run_id: &str) -> BTreeSet<String> {
    let url = pod.url(&format!(
        "/api/sandboxes?prefix={PREFIX}-{run_id}-&limit=1000"
    ));
    let list: serde_json::Value = pod
        .client()
        .get(url)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The records (`/api/records`) of a run the pod lists: name to id.
pub async fn listed_records(
    pod: &testkit_engine::pod::Pod,
    run_id: &str,
) -> std::collections::BTreeMap<String, String> {
    let url = pod.url(&format!("/api/records?prefix={PREFIX}-{run_id}-"));
    let list: serde_json::Value = pod
        .client()
        .get(url)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_owned(),
                i["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Whether the pod says `name` exists (GET by name; not subject to list lag).
pub async fn exists(pod: &testkit_engine::pod::Pod, name: &str) -> bool {
    let status = pod
        .client()
        .get(pod.url(&format!("/api/sandboxes/{name}")))
        .send()
        .await
        .unwrap()
        .status();
    status != reqwest::StatusCode::NOT_FOUND
}

/// Polls `done` every 50 ms, panicking after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One run of (part of) the fixture suite against a pod.
pub struct Run {
    pub id: String,
    pub results: PathBuf,
    /// The run's secrets dir (its session), gone with the run, as the
    /// runner's is.
    pub secrets: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    pub fn new(id: &str) -> Run {
        let dir = tempfile::tempdir().unwrap();
        Run {
            id: id.to_owned(),
            results: dir.path().join("results"),
            secrets: dir.path().join("secrets"),
            _dir: dir,
        }
    }

    /// `cargo test` (or `cargo nextest run`) of the fixture, in its own
    /// process group, with `args` after the subcommand.
    pub fn command(&self, pod: &Sandboxd, nextest: bool, args: &[&str]) -> Command {
        let mut c = cargo();
        c.current_dir(suite_dir())
            .args(if nextest {
                &["nextest", "run"][..]
            } else {
                &["test", "-q"][..]
            })
            .args(args)
            .env("TESTKIT_POD_HANDLE", &pod.handle_file)
            .env("TESTKIT_RUN_ID", &self.id)
            .env("TESTKIT_RESULTS_DIR", &self.results)
            .env("TESTKIT_SECRETS_DIR", &self.secrets)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        c
    }

    /// Runs to the end; returns the exit status and the combined output.
    /// Runs the one fixture test `resources::<test>` under `cargo test`.
    pub fn exact(&self, pod: &Sandboxd, test: &str) -> (ExitStatus, String) {
        let name = format!("resources::{test}");
        self.run(pod, false, &["--test", "resources", "--", "--exact", &name])
    }

    pub fn run(&self, pod: &Sandboxd, nextest: bool, args: &[&str]) -> (ExitStatus, String) {
        self.finish(self.command(pod, nextest, args))
    }

    /// Runs `command` (from [`Run::command`]) to the end, and checks that
    /// no process of the run is left.
    pub fn finish(&self, mut command: Command) -> (ExitStatus, String) {
        let child = command.spawn().unwrap();
        let pgid = child.id() as i32;
        let out = child.wait_with_output().unwrap();
        self.assert_no_strays(Some(pgid));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status, text)
    }

    pub fn journal(&self) -> Vec<testkit_engine::resource::JournalEntry> {
        testkit_engine::resource::read_journal(&self.results)
    }

    /// Names the journal says were created (pending or later).
    pub fn journaled_names(&self) -> BTreeSet<String> {
        self.journal().into_iter().map(|e| e.name).collect()
    }

    pub fn record(&self, test: &str) -> serde_json::Value {
        let name = format!("resources::{test}");
        let record = testkit_engine::report::read_records(&self.results)
            .unwrap()
            .into_iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no record of {name} under {}", self.results.display()));
        serde_json::to_value(record).unwrap()
    }

    /// No process of the run is left: none in `pgid`, and none anywhere
    /// whose environment names this run's results folder (the reapers).
    pub fn assert_no_strays(&self, pgid: Option<i32>) {
        if let Some(pgid) = pgid {
            wait_for(
                "the fixture's process group to drain",
                Duration::from_secs(20),
                || killpg(Pid::from_raw(pgid), None).is_err(),
            );
        }
        let needle = format!("TESTKIT_RESULTS_DIR={}", self.results.display());
        wait_for(
            "every process of the run to exit",
            Duration::from_secs(20),
            || self.processes_of_run(&needle).is_empty(),
        );
    }

    fn processes_of_run(&self, needle: &str) -> Vec<i32> {
        let me = std::process::id() as i32;
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(env) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            // Zombies have an empty environment and are not running.
            if env.split(|&b| b == 0).any(|var| var == needle.as_bytes())
                && kill(Pid::from_raw(pid), None).is_ok()
            {
                pids.push(pid);
            }
        }
        pids
    }
}
