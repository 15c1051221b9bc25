//! End-to-end tests of `testkit-runner`: the real binary, real `sandboxd`
//! pods, real fixture suites (`tests/fixtures/`) copied to temp dirs and
//! built with cargo and nextest in one shared target dir, so that their
//! dependencies build once.

mod bounds;
mod browser;
mod categories;
mod cluster;
mod commands;
mod containers;
mod credentials;
mod durations;
mod fanout;
mod faults;
mod flaky;
mod leftovers;
mod machine_life;
mod machines;
mod outputs;
mod report;
mod rerun;
mod run;
mod sealed;
mod trace;
mod truth;
mod witnesses;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) const RUNNER: &str = env!("CARGO_BIN_EXE_testkit-runner");

/// The workspace root.
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// The target dir the fixture suites are built in: beside
/// this test's own, never inside a dir an outer cargo holds locked.
pub(crate) fn shared_target() -> PathBuf {
    let outer = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            exe.ancestors()
                .find(|d| d.join("CACHEDIR.TAG").is_file())
                .map(Path::to_owned)
        })
        .unwrap_or_else(|| workspace().join("target"));
    outer.join("fixtures")
}

/// The folder of the `sandboxd` (and `sandboxctl`) of this checkout, built
/// once per process.
pub(crate) fn sandboxd_dir() -> &'static Path {
    test_support::sandboxd_bin()
        .parent()
        .expect("an executable has a folder")
}

/// A copy of `tests/fixtures/<name>` in a temp dir, its testkit dependency
/// pointed at this checkout.
pub(crate) fn fixture(name: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("runner-fixture-")
        .tempdir()
        .unwrap();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
        dir.path(),
    );
    let manifest = dir.path().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let testkit = workspace().join("testkit");
    let text = text.replace(
        "path = \"../../../../testkit\"",
        &format!("path = {:?}", testkit.display().to_string()),
    );
    std::fs::write(&manifest, text).unwrap();
    dir
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" {
            continue;
        }
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&path, &to.join(&name));
        } else {
            std::fs::copy(&path, to.join(&name)).unwrap();
        }
    }
}

/// `cargo`, building in the shared target dir with the environment a
/// shell would give it: what cargo set for this test process
/// (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ...) is removed. Build scripts
/// watch those variables (ring's does), so a build that saw them and one
/// that did not (the runner's) would each rebuild ring and everything above
/// it for the other: every cargo a test starts in the shared target dir
/// comes from here.
pub(crate) fn fixture_cargo() -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    for var in testkit_engine::process::vars_set_by_cargo() {
        cmd.env_remove(var);
    }
    cmd.env("CARGO_TARGET_DIR", shared_target());
    cmd
}

/// The runner, set up to build in the shared target dir and to find
/// `sandboxd`.
pub(crate) fn runner() -> Command {
    runner_at(Path::new(RUNNER))
}

pub(crate) fn runner_at(exe: &Path) -> Command {
    let mut cmd = Command::new(exe);
    let path = std::env::join_paths(std::iter::once(sandboxd_dir().to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    cmd.env("CARGO_TARGET_DIR", shared_target())
        .env("PATH", path)
        .env_remove("FIXTURE_MODE")
        // Run on GitHub Actions, these tests' runs must not write into the
        // job's own step summary.
        .env_remove("GITHUB_STEP_SUMMARY")
        .stdin(Stdio::null());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("TESTKIT_") {
            cmd.env_remove(key);
        }
    }
    // The pods a run starts are listed there, not in the caller's HOME.
    cmd.env("TESTKIT_PODS_DIR", shared_target().join("pods"));
    cmd
}

/// One finished run of the runner.
pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Ran {
    pub(crate) fn from(output: Output) -> Ran {
        let ran = Ran {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        };
        eprintln!(
            "--- runner exit {}\n--- stdout\n{}\n--- stderr\n{}",
            ran.code, ran.stdout, ran.stderr
        );
        ran
    }

    /// `results: DIR` from the first lines.
    pub(crate) fn results(&self) -> PathBuf {
        let line = self
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("results: "))
            .expect("the runner printed its results folder");
        PathBuf::from(line)
    }

    pub(crate) fn run_id(&self) -> String {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix("run id: "))
            .expect("the runner printed its run id")
            .to_owned()
    }

    /// `verdict.jsonl`, line by line.
    pub(crate) fn verdicts(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.results().join("verdict.jsonl")).unwrap();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The verdict of `phase`.
    pub(crate) fn verdict(&self, phase: &str) -> (String, String) {
        let v = self
            .verdicts()
            .into_iter()
            .find(|v| v["phase"] == phase)
            .unwrap_or_else(|| panic!("no verdict for {phase}"));
        (
            v["verdict"].as_str().unwrap().to_owned(),
            v["evidence"].as_str().unwrap_or("").to_owned(),
        )
    }
}

/// Test counts of a `junit.xml`: (tests, failures, skipped incl. xfail).
pub(crate) fn junit_counts(path: &Path) -> (usize, usize, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let cases: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let failed = cases
        .iter()
        .filter(|c| {
            c.children()
                .any(|n| n.has_tag_name("failure") || n.has_tag_name("error"))
        })
        .count();
    let skipped = cases
        .iter()
        .filter(|c| c.children().any(|n| n.has_tag_name("skipped")))
        .count();
    (cases.len(), failed, skipped)
}

/// A `sandboxd` the test starts itself (a caller's pod), stopped with its
/// process group when dropped.
pub(crate) struct CallerPod {
    pod: test_support::Sandboxd,
    pub(crate) handle: serde_json::Value,
    pub(crate) handle_file: PathBuf,
}

impl CallerPod {
    pub(crate) fn start() -> CallerPod {
        CallerPod::start_with(&[])
    }

    /// A pod started with extra `serve` arguments, such as `--fault NAME`.
    pub(crate) fn start_with(args: &[&str]) -> CallerPod {
        let pod = test_support::Sandboxd::start(args);
        let handle = serde_json::from_str(pod.handle_json()).expect("handle JSON");
        CallerPod {
            handle,
            handle_file: pod.handle_file().to_owned(),
            pod,
        }
    }

    /// The pod's HOME.
    pub(crate) fn home(&self) -> &Path {
        self.pod.home()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.handle["base_url"].as_str().unwrap())
    }

    /// `GET path` with the token: (status, body).
    pub(crate) fn get(&self, path: &str) -> (u16, String) {
        http(
            "GET",
            &self.url(path),
            Some(self.handle["token"].as_str().unwrap()),
            None,
        )
    }

    pub(crate) fn alive(&mut self) -> bool {
        self.pod.is_running()
    }
}

/// One HTTP request over loopback with reqwest (the client testkit uses):
/// (status, body).
pub(crate) fn http(
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let method: reqwest::Method = method.parse().unwrap();
        let mut request = reqwest::Client::new()
            .request(method, url)
            .timeout(Duration::from_secs(10))
            .header("content-type", "application/json")
            .body(body.unwrap_or("").to_owned());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    })
}

/// The run id a started runner names on the first line of its stdout
/// (piped).
pub(crate) fn run_id_of(run: &mut std::process::Child) -> String {
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(run.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    first
        .trim()
        .strip_prefix("run id: ")
        .expect("the runner names its run first")
        .to_owned()
}

/// Waits for `cond`, at most `limit`.
pub(crate) fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    cond()
}

/// Every cargo these tests start goes through [`fixture_cargo`]: one that
/// kept the variables cargo set for this process would rebuild ring and
/// everything above it for the next build in the shared target dir, and
/// that one again for it (seen: nine times in one run of these tests).
#[test]
fn every_cargo_these_tests_start_has_a_shells_environment() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration");
    let direct = concat!("Command::new(env!(", "\"CARGO\"))");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        // `fixture_cargo` itself is the one allowed.
        let allowed = usize::from(path.ends_with("main.rs"));
        if text.matches(direct).count() > allowed {
            found.push(path.display().to_string());
        }
    }
    assert!(
        found.is_empty(),
        "start cargo with `fixture_cargo()`, not `{direct}`, in: {found:?}"
    );
}
