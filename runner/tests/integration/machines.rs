//! Machine pods (`--pod vm`) for real: the fixture suite against sandboxd
//! installed from its `.deb` in a QEMU machine, and a runner SIGKILLed
//! while it is up leaving no QEMU and no overlay.
//!
//! Needs what a machine pod needs (root, `qemu-system-x86`, `qemu-utils`,
//! `dpkg-dev`, and, for the first image build, `debootstrap` and Debian's
//! mirror): a missing one fails the test with the runner's message naming
//! the package to install. The image cache is the runner's own
//! (`TESTKIT_MACHINE_CACHE`, else the user's).

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{fixture, runner, wait_for, Ran};

/// The fixture suite with a `[pod.vm]` that installs sandboxd's `.deb`
/// (built now into the suite's `debs/`) and reads its token in the guest.
pub(crate) fn machine_fixture() -> tempfile::TempDir {
    let suite = fixture("suite");
    test_support::sandboxd_deb(&suite.path().join("debs"));
    let toml = suite.path().join("testkit.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(
        "\n[pod.vm]\ndebs = \"debs\"\nport = 8080\n\
         fields = { token = { file = \"/etc/sandboxd/token.env\", var = \"SANDBOXD_TOKEN\" } }\n",
    );
    std::fs::write(&toml, text).unwrap();
    suite
}

/// The runner, with the caller's machine cache (the runner's environment
/// leaves out every `TESTKIT_` variable).
pub(crate) fn machine_runner() -> std::process::Command {
    let mut cmd = runner();
    if let Some(cache) = std::env::var_os("TESTKIT_MACHINE_CACHE") {
        cmd.env("TESTKIT_MACHINE_CACHE", cache);
    }
    cmd
}

/// A runner the test started, ended (SIGKILL) if the test fails first:
/// the machine's guard and the watchdog end the rest.
pub(crate) struct Running(pub(crate) Option<Child>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// QEMU's pid and the private dir of the pod `pod ls` lists in `pods`,
/// once it is up.
pub(crate) fn machine_of(pods: &Path) -> Option<(i32, PathBuf)> {
    for entry in std::fs::read_dir(pods).ok()?.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path().join("pod.json")) else {
            continue;
        };
        let record: serde_json::Value = serde_json::from_str(&text).ok()?;
        if record.get("phase").is_some_and(|p| !p.is_null()) {
            continue;
        }
        let pid = record["pid"].as_i64()? as i32;
        let private = PathBuf::from(record["private_dir"].as_str()?);
        return Some((pid, private));
    }
    None
}

/// The overlay of the machine whose pod's private dir is `private_dir`.
pub(crate) fn overlay_in(private_dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(private_dir)
        .ok()?
        .flatten()
        .map(|e| e.path().join("overlay.qcow2"))
        .find(|p| p.is_file())
}

pub(crate) fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !matches!(
            s.rsplit(") ").next().and_then(|r| r.chars().next()),
            Some('Z')
        )
    })
}

/// A runner of the fixture's `create_two` on a machine pod, with
/// `FIXTURE_MODE=mode`, once that test runs (it wrote its flag); the
/// runner's failure to get there fails the test, with its output.
pub(crate) fn running_test(suite: &Path, pods: &Path, mode: &str) -> Running {
    let flag = suite.join("running.flag");
    let child = machine_runner()
        .env("TESTKIT_PODS_DIR", pods)
        .env("FIXTURE_MODE", mode)
        .env("FIXTURE_FLAG", &flag)
        .args(["run", "--pod", "vm"])
        .arg(suite)
        .args(["-E", "test(create_two)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = Running(Some(child));
    // The boot (TCG on a loaded host), the suite's build, the first test;
    // a first image build on a fresh machine takes a few minutes more.
    let started = wait_for(Duration::from_secs(900), || {
        flag.exists()
            || running
                .0
                .as_mut()
                .is_some_and(|c| c.try_wait().unwrap().is_some())
    });
    if !(started && flag.exists()) {
        let mut child = running.0.take().expect("the runner");
        let _ = child.kill();
        let ran = Ran::from(child.wait_with_output().unwrap());
        panic!(
            "the fixture's test did not start under a machine pod (runner exit {}): {}",
            ran.code, ran.stderr
        );
    }
    running
}

/// A runner SIGKILLed while its machine pod is up leaves nothing: within
/// 5 s of its death, no QEMU of the pod runs and its overlay is gone (the
/// machine's guard and the run's watchdog both know them).
#[test]
fn a_sigkilled_runner_leaves_no_qemu_and_no_overlay() {
    let suite = machine_fixture();
    let pods = tempfile::tempdir().unwrap();
    let mut running = running_test(suite.path(), pods.path(), "slow");
    let runner = running.0.as_mut().expect("the runner");
    let (qemu, private_dir) =
        machine_of(pods.path()).expect("pod ls lists the run's machine pod once it is up");
    let overlay = overlay_in(&private_dir).expect("the machine's overlay is in the pod's dir");
    let cmdline = std::fs::read(format!("/proc/{qemu}/cmdline")).unwrap_or_default();
    assert!(
        cmdline.starts_with(b"qemu-system-x86_64\0"),
        "pid {qemu} is QEMU: {:?}",
        String::from_utf8_lossy(&cmdline)
    );

    kill(Pid::from_raw(runner.id() as i32), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    let _ = runner.wait();
    let gone = wait_for(Duration::from_secs(5), || !alive(qemu) && !overlay.exists());
    eprintln!(
        "timing: QEMU and the overlay gone {:?} after the runner's SIGKILL",
        killed.elapsed()
    );
    assert!(
        gone,
        "5 s after the runner's SIGKILL: QEMU {qemu} alive: {}, overlay {} there: {}",
        alive(qemu),
        overlay.display(),
        overlay.exists()
    );
    // The watchdog's part: the pod's private dir and its record go too.
    assert!(
        wait_for(Duration::from_secs(20), || !private_dir.exists()),
        "{} outlived the runner",
        private_dir.display()
    );
}

/// `--pod vm` on a suite without `[pod.vm]` is a bad argument, refused
/// before anything starts, saying what to add; so are an environment or
/// an installer the suite does not declare, and either without a machine.
#[test]
fn a_machine_run_without_its_section_or_with_an_undeclared_choice_is_refused() {
    let suite = fixture("suite");
    let refused = |args: &[&str], says: &str| {
        let ran = Ran::from(runner().args(args).arg(suite.path()).output().unwrap());
        assert_eq!(ran.code, 64, "{args:?}: {}", ran.stderr);
        assert!(ran.stderr.contains(says), "{}", ran.stderr);
    };
    // The page in the checkout this runner uses.
    refused(
        &["run", "--pod", "vm"],
        &format!(
            "--pod vm: the suite's testkit.toml has no [pod.vm] (the image, the packages, the \
             port): add one (see {}/book/src/pod-machine.md#your-product-on-a-machine)",
            crate::workspace().display()
        ),
    );
    let toml = suite.path().join("testkit.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str("\n[pod.vm]\ndebs = \"debs\"\nport = 8080\n");
    std::fs::write(&toml, text).unwrap();
    refused(
        &["run", "--pod", "vm", "--environment", "debian-12-docker"],
        "--environment \"debian-12-docker\": the suite's [pod.vm] environments are debian-12: \
         name one, or add it to `environments` in testkit.toml",
    );
    refused(
        &["run", "--pod", "vm", "--installer", "binaries"],
        "--installer binaries: the suite's [pod.vm] does not set it up ([pod.vm.binaries], \
         files to copy and a unit to start); it sets up deb",
    );
    refused(
        &["run", "--environment", "debian-12"],
        "--environment and --installer choose a machine pod's: add --pod vm",
    );
}

/// The events the journal of `results` holds for faults, in order.
fn fault_events(results: &Path) -> Vec<String> {
    testkit_engine::resource::read_journal(results)
        .into_iter()
        .filter(|e| e.kind == "fault")
        .map(|e| format!("{:?} {}", e.event, e.name).to_lowercase())
        .collect()
}

/// A test process SIGKILLed while it holds a netem delay and a pause on a
/// machine pod: its reaper resumes the guest and removes the queue, and
/// proves both undone (the guest runs, its agent and its service answer, no
/// netem queue is left), newest first; both faults were seen held first.
#[test]
fn a_killed_test_s_machine_faults_are_undone_by_its_reaper() {
    let suite = fixture("cluster");
    // The fixture's container pod is not booted, but its context is read.
    crate::copy_dir(
        &crate::workspace().join("suites/conformance/container"),
        &suite.path().join("container"),
    );
    test_support::sandboxd_deb(&suite.path().join("debs"));
    let toml = suite.path().join("testkit.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(
        "\n[pod.vm]\ndebs = \"debs\"\nport = 8080\n\
         fields = { token = { file = \"/etc/sandboxd/token.env\", var = \"SANDBOXD_TOKEN\" } }\n",
    );
    std::fs::write(&toml, text).unwrap();
    let pods = tempfile::tempdir().unwrap();
    let results = tempfile::tempdir().unwrap();
    let flag = results.path().join("holding.pid");
    let child = machine_runner()
        .env("TESTKIT_PODS_DIR", pods.path())
        .env("FIXTURE_FAULT", "delay,pause")
        .env("FIXTURE_NODE", "machine")
        .env("FIXTURE_FLAG", &flag)
        .args(["run", "--pod", "vm", "--results"])
        .arg(results.path())
        .arg(suite.path())
        .args(["-E", "test(hold_fault)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = Running(Some(child));
    let held = wait_for(Duration::from_secs(900), || {
        flag.exists()
            || running
                .0
                .as_mut()
                .is_some_and(|c| c.try_wait().unwrap().is_some())
    });
    if !(held && flag.exists()) {
        let mut child = running.0.take().expect("the runner");
        let _ = child.kill();
        let ran = Ran::from(child.wait_with_output().unwrap());
        panic!(
            "the test did not hold its faults on the machine (runner exit {}): {}{}",
            ran.code, ran.stdout, ran.stderr
        );
    }
    // Both held, seen from outside: QEMU's monitor and the guest's kernel.
    let (_, private_dir) = machine_of(pods.path()).expect("the run's machine pod");
    let run_dir = overlay_in(&private_dir)
        .and_then(|o| o.parent().map(Path::to_owned))
        .expect("the machine's run dir");
    let access = testkit_engine::machine::MachineAccess::new(run_dir, String::new(), None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(rt.block_on(access.status()).unwrap(), "paused");
    let pid: i32 = std::fs::read_to_string(&flag)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let killed = Instant::now();
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    let settled = wait_for(Duration::from_secs(300), || {
        fault_events(results.path())
            .iter()
            .filter(|e| e.starts_with("reaped") || e.starts_with("leaked"))
            .count()
            == 2
    });
    eprintln!(
        "timing: the reaper settled both faults {:?} after the SIGKILL",
        killed.elapsed()
    );
    let events = fault_events(results.path());
    assert!(settled, "the reaper settled both faults: {events:?}");
    assert_eq!(
        events.iter().filter(|e| e.starts_with("reaped")).count(),
        2,
        "both undone and proven by the reaper: {events:?}"
    );
    // The run goes on to its teardown: QEMU and the overlay proven gone.
    let ran = Ran::from(
        running
            .0
            .take()
            .expect("the runner")
            .wait_with_output()
            .unwrap(),
    );
    let (verdict, evidence) = ran.verdict("down");
    assert_eq!(verdict, "pass", "down: {evidence}");
}
