//! Fixture suites: copied next to the build dir, built once per checkout,
//! and run under `cargo test` and `cargo nextest run` with bounded waits.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// The longest one cargo invocation may take; the first one builds testkit
/// and its dependencies for the fixture.
const COMMAND_LIMIT: Duration = Duration::from_secs(20 * 60);

/// One fixture workspace, synced to `<target>/fixtures/src/<name>`.
pub struct Fixture {
    pub dir: PathBuf,
    pub target_dir: PathBuf,
    pub expected: Expected,
}

#[derive(Debug, Deserialize)]
pub struct Expected {
    pub binaries: BTreeMap<String, ExpectedBinary>,
    #[serde(rename = "test")]
    pub tests: Vec<ExpectedTest>,
}

#[derive(Debug, Deserialize)]
pub struct ExpectedBinary {
    pub cargo_test_exit: i32,
    pub nextest_exit: i32,
}

#[derive(Debug, Deserialize)]
pub struct ExpectedTest {
    pub binary: String,
    pub name: String,
    pub outcome: String,
    pub failure_kind: Option<String>,
    pub known_issue: Option<String>,
    pub message: Option<String>,
}

impl Expected {
    pub fn of_binary<'a>(&'a self, binary: &'a str) -> impl Iterator<Item = &'a ExpectedTest> + 'a {
        self.tests.iter().filter(move |t| t.binary == binary)
    }
}

/// What a finished command printed and returned.
#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn describe(&self) -> String {
        format!(
            "exit {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Cargo invocations of this process run one at a time: they share a build
/// dir, and a 2-core machine gains nothing from running them side by side.
static CARGO: Mutex<()> = Mutex::new(());

fn repo_testkit_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The target dir of this test binary: `CARGO_TARGET_DIR`, else the nearest
/// ancestor of the executable that cargo marked with `CACHEDIR.TAG`.
fn outer_target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .map(Path::to_owned)
        .unwrap_or_else(|| repo_testkit_dir().join("../target"))
}

/// The fixture `name`, synced once per process. Files are written only when
/// their content changed, so cargo's fingerprints keep builds reused across
/// test processes and runs.
pub fn fixture(name: &str) -> &'static Fixture {
    static FIXTURES: Mutex<BTreeMap<String, &'static Fixture>> = Mutex::new(BTreeMap::new());
    let mut fixtures = FIXTURES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(f) = fixtures.get(name) {
        return f;
    }
    // Fixture suites build in `<target>/fixtures`, the target dir the
    // runner's tests use too, so their shared crates build once.
    let outer = outer_target_dir();
    let source = repo_testkit_dir().join("tests/fixtures").join(name);
    let dir = outer.join("fixture-src").join(name);
    sync_dir(&source, &dir);
    let manifest = std::fs::read_to_string(source.join("Cargo.toml")).unwrap();
    let testkit = repo_testkit_dir();
    let manifest = manifest.replace(
        r#"path = "../../..""#,
        &format!("path = {:?}", testkit.display().to_string()),
    );
    write_if_changed(&dir.join("Cargo.toml"), manifest.as_bytes());
    // The fixture resolves to the versions the root workspace locked; cargo
    // may prune the copy afterwards, so it is not refreshed once there.
    if !dir.join("Cargo.lock").exists() {
        std::fs::copy(testkit.join("../Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    }
    let expected = toml::from_str(&std::fs::read_to_string(source.join("expected.toml")).unwrap())
        .unwrap_or_else(|e| panic!("invalid expected.toml of fixture {name}: {e}"));
    let fixture = Box::leak(Box::new(Fixture {
        dir,
        target_dir: outer.join("fixtures"),
        expected,
    }));
    fixtures.insert(name.to_owned(), fixture);
    fixture
}

fn sync_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_name() == "target" || entry.file_name() == "Cargo.lock" {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            sync_dir(&src, &dst);
        } else {
            write_if_changed(&dst, &std::fs::read(&src).unwrap());
        }
    }
}

fn write_if_changed(path: &Path, content: &[u8]) {
    if std::fs::read(path).is_ok_and(|old| old == content) {
        return;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

impl Fixture {
    /// A `cargo` command in the fixture, with an environment free of the
    /// outer run's cargo, nextest and testkit variables.
    pub fn cargo(&self, args: &[&str]) -> Command {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(args).current_dir(&self.dir);
        scrub_env(&mut cmd);
        cmd.env("CARGO_TARGET_DIR", &self.target_dir);
        cmd
    }

    /// Runs `cargo <args>` with results going to `results` under run `run_id`.
    pub fn run_cargo(&self, args: &[&str], results: &Path, run_id: &str) -> Output {
        let mut cmd = self.cargo(args);
        cmd.env("TESTKIT_RESULTS_DIR", results)
            .env("TESTKIT_RUN_ID", run_id);
        let _one_at_a_time = CARGO.lock().unwrap_or_else(|e| e.into_inner());
        run_bounded(cmd, COMMAND_LIMIT)
    }

    /// Builds the fixture's tests and returns each test binary's path by name.
    pub fn test_binaries(&self) -> &'static BTreeMap<String, PathBuf> {
        static BINARIES: OnceLock<BTreeMap<String, PathBuf>> = OnceLock::new();
        BINARIES.get_or_init(|| {
            let cmd = self.cargo(&["test", "--no-run", "--message-format=json"]);
            let out = {
                let _one_at_a_time = CARGO.lock().unwrap_or_else(|e| e.into_inner());
                run_bounded(cmd, COMMAND_LIMIT)
            };
            assert_eq!(
                out.code,
                0,
                "building the fixture failed: {}",
                out.describe()
            );
            let mut binaries = BTreeMap::new();
            for line in out.stdout.lines() {
                let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
                    continue;
                };
                if let (Some(exe), Some(name)) =
                    (msg["executable"].as_str(), msg["target"]["name"].as_str())
                {
                    binaries.insert(name.to_owned(), PathBuf::from(exe));
                }
            }
            binaries
        })
    }

    /// Runs a built test binary of the fixture directly, as cargo would.
    pub fn run_binary(&self, binary: &str, args: &[&str], results: &Path, run_id: &str) -> Output {
        let exe = &self.test_binaries()[binary];
        let mut cmd = Command::new(exe);
        cmd.args(args).current_dir(&self.dir);
        scrub_env(&mut cmd);
        cmd.env("CARGO_MANIFEST_DIR", &self.dir)
            .env("TESTKIT_RESULTS_DIR", results)
            .env("TESTKIT_RUN_ID", run_id);
        run_bounded(cmd, Duration::from_secs(120))
    }
}

impl Fixture {
    /// Runs a built test binary of the fixture the way a nextest archive or
    /// a debugger does: from `cwd`, without cargo's environment, with `env`.
    pub fn run_binary_bare(
        &self,
        binary: &str,
        cwd: &Path,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Output {
        let exe = &self.test_binaries()[binary];
        let mut cmd = Command::new(exe);
        cmd.current_dir(cwd);
        scrub_env(&mut cmd);
        cmd.envs(env.iter().copied());
        run_bounded(cmd, Duration::from_secs(120))
    }
}

fn scrub_env(cmd: &mut Command) {
    const KEEP: &[&str] = &[
        "CARGO_HOME",
        "CARGO_BUILD_JOBS",
        "CARGO_NET_OFFLINE",
        "CARGO_HTTP_PROXY",
    ];
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let outer = key.starts_with("NEXTEST")
            || key.starts_with("TESTKIT_")
            || key.starts_with("__NEXTEST")
            || (key.starts_with("CARGO_") && !KEEP.contains(&key.as_ref()))
            || key == "RUST_TEST_THREADS"
            || key == "TOKIO_WORKER_THREADS";
        if outer {
            cmd.env_remove(key.as_ref());
        }
    }
}

/// Runs `cmd` in its own process group and waits at most `limit`; past it
/// the whole group is killed and the test fails.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("failed to start {cmd:?}: {e}"));
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}; its process group was killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = String::from_utf8_lossy(&out_reader.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned();
    Output {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    }
}

/// A fresh results folder and a run id unique to it.
pub fn results_dir(tag: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("testkit-{tag}-"))
        .tempdir()
        .unwrap();
    let mut seed = [0u8; 4];
    getrandom::fill(&mut seed).unwrap();
    let suffix: String = seed.iter().map(|b| format!("{b:02x}")).collect();
    let id = format!(
        "{}{suffix}",
        tag.chars()
            .filter(|c| c.is_ascii_lowercase())
            .take(6)
            .collect::<String>()
    );
    (dir, id)
}

/// Whether `cargo nextest` is installed.
pub fn nextest_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["nextest", "--version"]);
        run_bounded(cmd, Duration::from_secs(60)).code == 0
    })
}
