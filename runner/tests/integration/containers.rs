//! Container pods on the real Docker Engine: the fixture suite against
//! `sandboxd` as a container (the conformance suite's image context), a
//! runner SIGKILLed mid-test, a container that crashes, one stopped from
//! outside, one that ignores SIGTERM, the janitor and the residue sweep by
//! label, and the token kept out of labels, image layers and results.
//!
//! Every test names its run (`--run-id`) and removes whatever carries that
//! run's label when it ends, passed or failed ([`EngineGuard`]).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{fixture, runner, wait_for, workspace, Ran};

/// `docker ARGS`: its stdout; panics, saying what it answered, when it fails.
fn docker(args: &[&str]) -> String {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("`docker` runs (the Docker CLI is on PATH)");
    assert!(
        out.status.success(),
        "docker {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Every container, network and volume whose label `key` is `value`:
/// `kind name` each.
pub(crate) fn labelled(key: &str, value: &str) -> Vec<String> {
    let filter = format!("label={key}={value}");
    let mut found = Vec::new();
    for (kind, args) in [
        ("container", vec!["ps", "-a", "--format", "{{.Names}}"]),
        ("network", vec!["network", "ls", "--format", "{{.Name}}"]),
        ("volume", vec!["volume", "ls", "--format", "{{.Name}}"]),
    ] {
        let mut args = args;
        args.extend(["--filter", &filter]);
        found.extend(
            docker(&args)
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| format!("{kind} {l}")),
        );
    }
    found
}

/// Removes every container, network and volume of run `run_id` (by its
/// label, exactly) when dropped, whatever the test did.
struct EngineGuard(String);

impl Drop for EngineGuard {
    fn drop(&mut self) {
        let filter = format!("label=testkit.run={}", self.0);
        let ids = |args: &[&str]| -> Vec<String> {
            Command::new("docker")
                .args(args)
                .args(["--filter", &filter, "-q"])
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .split_whitespace()
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        for (list, remove) in [
            (vec!["ps", "-a"], vec!["rm", "-f", "-v"]),
            (vec!["network", "ls"], vec!["network", "rm"]),
            (vec!["volume", "ls"], vec!["volume", "rm", "-f"]),
        ] {
            let found = ids(&list);
            if !found.is_empty() {
                let _ = Command::new("docker")
                    .args(&remove)
                    .args(&found)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

fn fresh_run_id(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{what}{}{nanos:x}", std::process::id() % 1000)
        .chars()
        .take(16)
        .collect()
}

/// The fixture suite with `[pod.container]`: sandboxd's image context (that
/// of the conformance suite), its HOME on a volume of the pod, and
/// `command` as given.
fn container_fixture(command: &str) -> tempfile::TempDir {
    container_fixture_with(command, "")
}

/// [`container_fixture`], with `extra` lines in `[pod.container]`.
fn container_fixture_with(command: &str, extra: &str) -> tempfile::TempDir {
    container_fixture_section(&format!(
        "build = {{ context = \"container\", prepare = [[\"sh\", \"prepare.sh\"]] }}\n\
         port = 8080\n\
         command = {command}\n\
         mounts = [{{ volume = \"home\", target = \"/home/pod\" }}]\n{extra}\n"
    ))
}

/// The fixture suite with sandboxd's image context and `section` as its
/// `[pod.container]`.
fn container_fixture_section(section: &str) -> tempfile::TempDir {
    let suite = fixture("suite");
    crate::copy_dir(
        &workspace().join("suites/conformance/container"),
        &suite.path().join("container"),
    );
    let toml = suite.path().join("testkit.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(&format!("\n[pod.container]\n{section}"));
    std::fs::write(&toml, text).unwrap();
    suite
}

const SERVE: &str = r#"["/bin/sandboxd", "serve", "--home", "/home/pod", "--listen", "{listen}"]"#;

/// A runner the test started, killed if the test fails before it ends.
struct Running(Option<Child>);

impl Running {
    /// `run --pod container --run-id RUN` of `suite` in `FIXTURE_MODE=mode`,
    /// `adjust` applied last; returns once the mode's test is running (its
    /// flag exists).
    fn start(
        suite: &Path,
        pods: &Path,
        run_id: &str,
        mode: &str,
        adjust: impl FnOnce(&mut Command),
    ) -> Running {
        let flag = suite.join("running.flag");
        let mut command = runner();
        command
            .env("TESTKIT_PODS_DIR", pods)
            .env("FIXTURE_MODE", mode)
            .env("FIXTURE_FLAG", &flag)
            .args(["run", "--pod", "container", "--run-id", run_id])
            .arg(suite)
            .args(["-E", "test(create_two)"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        adjust(&mut command);
        let mut child = command.spawn().unwrap();
        let started = wait_for(Duration::from_secs(300), || {
            flag.exists() || child.try_wait().unwrap().is_some()
        });
        let running = Running(Some(child));
        assert!(started && flag.exists(), "the fixture's test started");
        running
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.0.as_ref().unwrap().id() as i32)
    }

    fn finish_within(mut self, limit: Duration) -> Ran {
        let mut child = self.0.take().unwrap();
        let ended = wait_for(limit, || child.try_wait().unwrap().is_some());
        if !ended {
            let _ = child.kill();
        }
        let ran = Ran::from(child.wait_with_output().unwrap());
        assert!(ended, "the run ended within {limit:?}");
        ran
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGINT);
            if !wait_for(Duration::from_secs(60), || c.try_wait().unwrap().is_some()) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// The container of run `run_id`'s pod.
fn pod_container(run_id: &str) -> String {
    let name = docker(&[
        "ps",
        "--filter",
        &format!("label=testkit.run={run_id}"),
        "--filter",
        "label=testkit.role=pod",
        "--format",
        "{{.Names}}",
    ]);
    assert!(!name.is_empty(), "run {run_id} has a running pod container");
    name
}

fn release(suite: &Path) {
    std::fs::write(suite.join("running.flag.go"), "go").unwrap();
}

/// A SIGKILLed runner leaves nothing in the engine: until it dies its
/// container, network and volume are there, labelled with the run; within
/// seconds of its death the watchdog has removed every one of them.
#[test]
fn a_sigkilled_runners_containers_networks_and_volumes_are_removed_by_its_watchdog() {
    let suite = container_fixture(SERVE);
    let pods = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("kill");
    let _guard = EngineGuard(run_id.clone());
    let child = Running::start(suite.path(), pods.path(), &run_id, "slow", |_| {});
    let before = labelled("testkit.run", &run_id);
    for kind in ["container", "network", "volume"] {
        assert!(
            before.iter().any(|o| o.starts_with(kind)),
            "a {kind} labelled with the run: {before:?}"
        );
    }
    // Each names its maker, the runner, by which any janitor tells the
    // run is live.
    let runner_pid = child.pid().as_raw();
    let ticks = testkit_engine::process::start_ticks(runner_pid).unwrap();
    let maker = format!("testkit.maker={runner_pid}-{ticks}");
    assert_eq!(
        labelled("testkit.run", &run_id),
        labelled("testkit.maker", &format!("{runner_pid}-{ticks}")),
        "{maker}"
    );
    let ls = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "ls"])
            .output()
            .unwrap(),
    );
    assert!(
        ls.stdout.contains(&pod_container(&run_id)),
        "pod ls names the container: {}",
        ls.stdout
    );
    kill(child.pid(), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    let mut child = child;
    if let Some(mut c) = child.0.take() {
        let _ = c.wait();
    }
    let gone = wait_for(Duration::from_secs(20), || {
        labelled("testkit.run", &run_id).is_empty()
    });
    let took = killed.elapsed();
    eprintln!("timing: the watchdog removed {before:?} {took:?} after the runner's SIGKILL");
    assert!(
        gone,
        "left in the engine 20s after the runner's SIGKILL: {:?}",
        labelled("testkit.run", &run_id)
    );
}

/// A container that exits mid-run (sandboxd's `crash-after`: an abort, whose
/// core dump a scratch image has nowhere to write, hence 134 or 139) is
/// the pod-crash verdict, naming its container and exit code, with its last
/// lines; teardown still removes everything of the run.
#[test]
fn a_container_that_exits_mid_run_is_a_crash_with_its_exit_code() {
    let suite = container_fixture(
        r#"["/bin/sandboxd", "serve", "--home", "/home/pod", "--listen", "{listen}", "--fault", "crash-after=25"]"#,
    );
    let pods = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("crash");
    let _guard = EngineGuard(run_id.clone());
    let flag = suite.path().join("pid.flag");
    let ran = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .env("FIXTURE_MODE", "crash")
            .env("FIXTURE_FLAG", &flag)
            .args(["run", "--pod", "container", "--run-id", &run_id])
            .arg(suite.path())
            .args(["-E", "test(create_two)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 2, "the run could not complete");
    let (verdict, evidence) = ran.verdict("pod");
    assert_eq!(verdict, "fail");
    assert!(evidence.contains("crashed mid-run"), "{evidence}");
    assert!(
        evidence.contains("its container testkit-")
            && (evidence.contains("exited with code 134")
                || evidence.contains("exited with code 139")),
        "{evidence}"
    );
    assert!(evidence.contains("its last lines: "), "{evidence}");
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "pass", "{why}");
    assert!(labelled("testkit.run", &run_id).is_empty());
}

/// A suite whose only pod is `[pod.container]` (no `[pod] command`) runs
/// it as a container when the run does not say `--pod`: it used to start
/// the default sandboxd as a process instead. `[pod] stop_grace` is the
/// grace of its down.
#[test]
fn a_suite_whose_only_pod_is_a_container_runs_it_without_being_told() {
    let suite = container_fixture(SERVE);
    let toml = suite.path().join("testkit.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let with_grace = text.replacen("[suite]\n", "[pod]\nstop_grace = \"3s\"\n\n[suite]\n", 1);
    std::fs::write(&toml, with_grace).unwrap();
    let pods = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("bydefault");
    let _guard = EngineGuard(run_id.clone());
    let ran = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["run", "--run-id", &run_id])
            .arg(suite.path())
            .args(["-E", "test(create_two)"])
            .output()
            .unwrap(),
    );
    let (up, evidence) = ran.verdict("up");
    assert_eq!(up, "pass", "{evidence}\n{}{}", ran.stdout, ran.stderr);
    assert!(evidence.contains("container"), "{evidence}");
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "pass", "{why}");
    assert!(labelled("testkit.run", &run_id).is_empty());
}

/// A container that someone else stops mid-run (`docker stop`) is named as
/// a stop from outside the run, not as a crash.
#[test]
fn a_container_stopped_from_outside_is_named_as_such_not_as_a_crash() {
    let suite = container_fixture(SERVE);
    let pods = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("outside");
    let _guard = EngineGuard(run_id.clone());
    let running = Running::start(suite.path(), pods.path(), &run_id, "hold", |_| {});
    docker(&["stop", "--time", "5", &pod_container(&run_id)]);
    release(suite.path());
    let ran = running.finish_within(Duration::from_secs(120));
    assert_eq!(ran.code, 2, "the run could not complete");
    let (verdict, evidence) = ran.verdict("pod");
    assert_eq!(verdict, "fail");
    assert!(
        evidence.contains("the pod was stopped from outside the run mid-run")
            && evidence.contains("`docker stop` or `docker kill`: signal 15"),
        "{evidence}"
    );
    assert!(!evidence.contains("crash"), "{evidence}");
    assert!(!ran.stdout.contains("the pod crashed"), "{}", ran.stdout);
    assert!(labelled("testkit.run", &run_id).is_empty());
}

/// A container that someone else removes mid-run (`docker rm -f`) is named
/// as removed from outside the run, not as a crash, and the run's teardown
/// still leaves nothing of it.
#[test]
fn a_container_removed_from_outside_is_named_as_such_not_as_a_crash() {
    let suite = container_fixture(SERVE);
    let pods = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("removed");
    let _guard = EngineGuard(run_id.clone());
    let running = Running::start(suite.path(), pods.path(), &run_id, "hold", |_| {});
    let container = pod_container(&run_id);
    docker(&["rm", "-f", &container]);
    release(suite.path());
    let ran = running.finish_within(Duration::from_secs(120));
    assert_eq!(ran.code, 2, "the run could not complete");
    let (verdict, evidence) = ran.verdict("pod");
    assert_eq!(verdict, "fail");
    assert!(
        evidence.contains("the pod was stopped from outside the run mid-run")
            && evidence.contains(&format!(
                "its container {container} was removed from outside the run (`docker rm -f`)"
            )),
        "{evidence}"
    );
    assert!(!evidence.contains("crash"), "{evidence}");
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "pass", "{why}");
    assert!(labelled("testkit.run", &run_id).is_empty());
}

/// A container whose main process ignores SIGTERM is killed once the grace
/// is over, and the down phase fails naming it, though nothing is left.
#[test]
fn a_container_that_ignores_sigterm_is_killed_and_reported() {
    let suite = container_fixture(
        r#"["/bin/sh", "-c", "trap '' TERM; /bin/sandboxd serve --home /home/pod --listen {listen} & wait"]"#,
    );
    let pods = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("deaf");
    let _guard = EngineGuard(run_id.clone());
    let ran = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["run", "--pod", "container", "--run-id", &run_id])
            .arg(suite.path())
            .args(["-E", "test(create_two)"])
            .output()
            .unwrap(),
    );
    let (tests, why) = ran.verdict("tests");
    assert_eq!(tests, "pass", "{why}");
    let (down, evidence) = ran.verdict("down");
    assert_eq!(down, "fail", "{evidence}");
    assert!(
        evidence.contains("ignored SIGTERM for the whole grace and was killed (SIGKILL)")
            && evidence.contains("none left"),
        "{evidence}"
    );
    assert_ne!(ran.code, 0);
    assert!(labelled("testkit.run", &run_id).is_empty());
}

/// A tiny image of the tests' own (static busybox), for containers the
/// tests plant themselves.
fn busybox_image() -> &'static str {
    static IMAGE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    const TAG: &str = "testkit-tests-busybox:1";
    IMAGE.get_or_init(|| {
        let ctx = tempfile::tempdir().unwrap();
        std::fs::copy("/usr/bin/busybox", ctx.path().join("busybox"))
            .expect("a static busybox at /usr/bin/busybox (apt-get install busybox-static)");
        std::fs::write(
            ctx.path().join("Dockerfile"),
            "FROM scratch\nCOPY busybox /bin/busybox\n",
        )
        .unwrap();
        docker(&[
            "build",
            "-q",
            "--label",
            "testkit.owner=testkit-tests",
            "-t",
            TAG,
            ctx.path().to_str().unwrap(),
        ]);
    });
    TAG
}

/// Plants a container, a network and a volume labelled with run `run_id`
/// (and one container with no label at all when `run_id` is empty).
fn plant(run_id: &str, name: &str) {
    let label = format!("testkit.run={run_id}");
    let mut labels = vec!["--label", "testkit.owner=testkit", "--label", &label];
    if run_id.is_empty() {
        labels.clear();
    }
    let mut create = vec!["create", "--name", name];
    create.extend(&labels);
    create.extend([busybox_image(), "/bin/busybox", "sleep", "60"]);
    docker(&create);
    if !run_id.is_empty() {
        let mut network = vec!["network", "create"];
        network.extend(&labels);
        network.push(name);
        docker(&network);
        let mut volume = vec!["volume", "create"];
        volume.extend(&labels);
        volume.push(name);
        docker(&volume);
    }
}

/// The janitor tests plant objects of runs with no runner: one janitor of
/// every old run at a time, so that neither removes what the other planted.
static JANITOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `janitor --older-than AGE --engine-only` removes the engine objects of a
/// run whose newest one is older than AGE, and leaves a run with one made
/// since alone, and a live run, whatever its age: exit 0, the live run's
/// skip said (other tests' live runs may be on the engine too).
#[test]
fn the_janitor_removes_the_engine_objects_of_old_runs_only() {
    let _one_janitor = JANITOR.lock().unwrap_or_else(|e| e.into_inner());
    let old = fresh_run_id("old");
    let young = fresh_run_id("young");
    // As old, but live: this process holds its run claim, as a runner does.
    let live = fresh_run_id("livejan");
    let _guards = (
        EngineGuard(old.clone()),
        EngineGuard(young.clone()),
        EngineGuard(live.clone()),
    );
    let settings = testkit_engine::settings::Settings::from_env().unwrap();
    let results = tempfile::tempdir().unwrap();
    let claim = testkit_engine::run::claim_run(&settings, &live, results.path()).unwrap();
    plant(&old, &format!("testkit-tests-{old}"));
    plant(&live, &format!("testkit-tests-{live}"));
    // Old by 12 s, against a limit of 10 s: the young run keeps 10 s, for
    // the janitor to start and list, however loaded the machine.
    std::thread::sleep(Duration::from_secs(12));
    plant(&young, &format!("testkit-tests-{young}"));
    let ran = Ran::from(
        runner()
            .args(["janitor", "--older-than", "10s", "--engine-only"])
            .output()
            .unwrap(),
    );
    drop(claim);
    // Leaving a live run alone is what the janitor is for: no failure.
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains(&format!("engine: skipped run {live}: it is live")),
        "{}",
        ran.stdout
    );
    assert_eq!(labelled("testkit.run", &live).len(), 3, "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains(&format!("engine: container testkit-tests-{old}")),
        "{}",
        ran.stdout
    );
    assert!(labelled("testkit.run", &old).is_empty());
    assert_eq!(labelled("testkit.run", &young).len(), 3, "{}", ran.stdout);
    assert!(!ran.stdout.contains(&young), "{}", ran.stdout);
}

/// A run is live whatever the environment of the janitor that asks: cron's
/// `janitor --run ID --engine-only` and `--older-than 0s --engine-only`,
/// run with another `XDG_RUNTIME_DIR`, `TMPDIR` and `HOME` (where the
/// runner's claim is not), leave alone the objects of a run whose maker
/// (their `testkit.maker` label: pid and start time) still runs; once it
/// is gone, the same janitor removes them. The cheapest fixture: a network
/// and a volume labelled as a live runner labels them, its maker a
/// `sleep` this test starts.
#[test]
fn the_janitor_leaves_a_live_run_alone_whatever_its_environment() {
    let _one_janitor = JANITOR.lock().unwrap_or_else(|e| e.into_inner());
    let run = fresh_run_id("elsewhere");
    let _guard = EngineGuard(run.clone());
    let mut maker = Command::new("sleep").arg("600").spawn().unwrap();
    let pid = maker.id() as i32;
    let ticks = testkit_engine::process::start_ticks(pid).unwrap();
    let labels = [
        "--label".to_owned(),
        "testkit.owner=testkit".to_owned(),
        "--label".to_owned(),
        format!("testkit.run={run}"),
        "--label".to_owned(),
        format!("testkit.maker={pid}-{ticks}"),
    ];
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    let name = format!("testkit-tests-{run}");
    for create in [["network", "create"], ["volume", "create"]] {
        let mut args = create.to_vec();
        args.extend(&labels);
        args.push(&name);
        docker(&args);
    }
    let elsewhere = tempfile::tempdir().unwrap();
    let janitor = |args: &[&str]| {
        Ran::from(
            runner()
                .arg("janitor")
                .args(args)
                .arg("--engine-only")
                .env("XDG_RUNTIME_DIR", elsewhere.path())
                .env("TMPDIR", elsewhere.path())
                .env("HOME", elsewhere.path())
                .output()
                .unwrap(),
        )
    };
    let by_name = janitor(&["--run", &run]);
    let by_age = janitor(&["--older-than", "0s"]);
    let left = labelled("testkit.run", &run);
    let _ = maker.kill();
    let _ = maker.wait();
    assert_eq!(left.len(), 2, "{}\n{}", by_name.stdout, by_age.stdout);
    let live = format!("engine: skipped run {run}: it is live (its objects were made by pid {pid}");
    assert!(by_name.stdout.contains(&live), "{}", by_name.stdout);
    assert_eq!(
        by_name.code, 1,
        "asked for by name, not done: {}",
        by_name.stdout
    );
    assert!(by_age.stdout.contains(&live), "{}", by_age.stdout);

    let after = janitor(&["--run", &run]);
    assert_eq!(after.code, 0, "{}", after.stdout);
    assert!(after.stdout.contains("2 removed"), "{}", after.stdout);
    assert!(labelled("testkit.run", &run).is_empty());
}

/// `janitor --run ID --engine-only` removes that run's containers, networks
/// and volumes, found by its label's exact value: a run whose id has this
/// one as a prefix and an unlabelled container are left alone.
#[test]
fn the_janitor_removes_one_runs_engine_objects_and_no_one_elses() {
    let _one_janitor = JANITOR.lock().unwrap_or_else(|e| e.into_inner());
    let run = fresh_run_id("jan");
    let longer = format!("{run}x");
    let _guards = (EngineGuard(run.clone()), EngineGuard(longer.clone()));
    let unlabelled = format!("testkit-tests-unlabelled-{run}");
    plant(&run, &format!("testkit-tests-{run}"));
    plant(&longer, &format!("testkit-tests-{longer}"));
    plant("", &unlabelled);
    let ran = Ran::from(
        runner()
            .args(["janitor", "--run", &run, "--engine-only"])
            .output()
            .unwrap(),
    );
    let _ = Command::new("docker")
        .args(["rm", "-f", &unlabelled])
        .output();
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    for kind in ["container", "network", "volume"] {
        assert!(
            ran.stdout
                .contains(&format!("engine: {kind} testkit-tests-{run}")),
            "{}",
            ran.stdout
        );
    }
    assert!(ran.stdout.contains("3 removed"), "{}", ran.stdout);
    assert!(labelled("testkit.run", &run).is_empty());
    assert_eq!(
        labelled("testkit.run", &longer).len(),
        3,
        "the run whose id has {run} as a prefix keeps all it had"
    );
    assert!(!ran.stdout.contains(&longer), "{}", ran.stdout);
    assert!(!ran.stdout.contains("unlabelled"), "{}", ran.stdout);
}

/// A container labelled with the run, still there when the tests end, is a
/// leak of the residue phase: named, removed, the run fails. While the run
/// goes on, its token is in no label of any of its containers, in no layer
/// of the pod's image, and afterwards in no file of its results folder.
#[test]
fn a_leftover_container_is_a_named_leak_and_the_token_reaches_no_label_layer_or_result() {
    let suite = container_fixture(SERVE);
    let pods = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let secrets = scratch.path().join("secrets");
    let run_id = fresh_run_id("leak");
    let _guard = EngineGuard(run_id.clone());
    let running = Running::start(suite.path(), pods.path(), &run_id, "hold", |c| {
        c.env("TESTKIT_SECRETS_DIR", &secrets);
    });
    let handle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(secrets.join("handle.json")).unwrap()).unwrap();
    let token = handle["token"].as_str().unwrap().to_owned();
    assert!(token.len() >= 16, "a real token: {token:?}");
    let container = pod_container(&run_id);
    let labels = docker(&["inspect", "--format", "{{json .Config.Labels}}", &container]);
    assert!(labels.contains(&run_id), "{labels}");
    assert!(!labels.contains(&token), "the token in a label: {labels}");
    let image = docker(&["inspect", "--format", "{{.Config.Image}}", &container]);
    let history = docker(&[
        "history",
        "--no-trunc",
        "--format",
        "{{.CreatedBy}}",
        &image,
    ]);
    assert!(!history.is_empty());
    assert!(!history.contains(&token), "the token in a layer: {history}");
    let leaked = format!("testkit-tests-leak-{run_id}");
    let label = format!("testkit.run={run_id}");
    docker(&[
        "create",
        "--name",
        &leaked,
        "--label",
        &label,
        busybox_image(),
        "/bin/busybox",
        "true",
    ]);
    release(suite.path());
    let ran = running.finish_within(Duration::from_secs(120));
    assert_eq!(ran.code, 1, "a leak fails the run");
    let (residue, evidence) = ran.verdict("residue");
    assert_eq!(residue, "fail", "{evidence}");
    assert!(
        evidence.contains(&format!("container {leaked}"))
            && evidence.contains("removed, verified gone"),
        "{evidence}"
    );
    assert!(
        !evidence.contains(&container),
        "the pod is not a leak: {evidence}"
    );
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "pass", "{why}");
    assert!(labelled("testkit.run", &run_id).is_empty());
    let mut stack = vec![ran.results()];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files += 1;
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(&token),
                    "the token in {}",
                    path.display()
                );
            }
        }
    }
    assert!(files > 5, "the results folder holds the run's files");
}

/// `--pod container` on a suite without `[pod.container]` is a bad
/// argument, refused before anything starts, saying what to add.
#[test]
fn a_container_run_of_a_suite_without_a_container_section_is_refused() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .args(["run", "--pod", "container"])
            .arg(suite.path())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 64);
    assert!(
        ran.stderr.contains("has no [pod.container]")
            && ran
                .stderr
                .contains("book/src/pod-container.md#your-service-as-a-container"),
        "{}",
        ran.stderr
    );
}

/// `pod up --pod container` leaves a container pod running that `pod ls`
/// shows with its container, and `pod down` removes its container, network
/// and volume, leaving nothing with its label.
#[test]
fn pod_up_ls_and_down_handle_a_container_pod() {
    let suite = container_fixture(SERVE);
    let pods = tempfile::tempdir().unwrap();
    let up = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "up", "--pod", "container", "--json", "--suite"])
            .arg(suite.path())
            .output()
            .unwrap(),
    );
    assert_eq!(up.code, 0, "{}", up.stderr);
    let out: serde_json::Value = serde_json::from_str(up.stdout.trim()).unwrap();
    let name = out["name"].as_str().unwrap().to_owned();
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(pods.path().join(&name).join("pod.json")).unwrap())
            .unwrap();
    let private = record["private_dir"].as_str().unwrap();
    let pod_id = private.rsplit("testkit-pod-").next().unwrap().to_owned();
    // Removed by its label whatever happens below.
    struct PodGuard(String);
    impl Drop for PodGuard {
        fn drop(&mut self) {
            let filter = format!("label=testkit.pod={}", self.0);
            for args in [
                format!("docker rm -f -v $(docker ps -aq --filter {filter})"),
                format!("docker network rm $(docker network ls -q --filter {filter})"),
                format!("docker volume rm -f $(docker volume ls -q --filter {filter})"),
            ] {
                let _ = Command::new("sh")
                    .args(["-c", &format!("{args} 2>/dev/null")])
                    .status();
            }
        }
    }
    let _guard = PodGuard(pod_id.clone());
    assert_eq!(
        labelled("testkit.pod", &pod_id).len(),
        3,
        "container, network, volume"
    );
    let (status, _) = crate::http(
        "GET",
        &format!("{}/api/health", out["base_url"].as_str().unwrap()),
        None,
        None,
    );
    assert_eq!(status, 200);
    // The handle names the container, and what a hung test's report reads
    // of it follows the container: running with its last lines, paused.
    let handle: serde_json::Value = serde_json::from_slice(
        &std::fs::read(pods.path().join(&name).join("handle.json")).unwrap(),
    )
    .unwrap();
    let container: testkit_engine::pod::container::PodContainer =
        serde_json::from_value(handle["container"].clone())
            .unwrap_or_else(|e| panic!("the handle names no container ({e}): {handle}"));
    assert_eq!(container.pod_id, pod_id);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let running = rt.block_on(container.describe(3));
    assert!(
        running.starts_with("node pod: running; its last 3 lines:\n    "),
        "{running}"
    );
    docker(&["pause", &format!("testkit-{pod_id}")]);
    let paused = rt.block_on(container.describe(3));
    docker(&["unpause", &format!("testkit-{pod_id}")]);
    assert!(paused.starts_with("node pod: paused;"), "{paused}");
    let ls = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "ls"])
            .output()
            .unwrap(),
    );
    assert!(
        ls.stdout.lines().any(|l| l.starts_with(&name)
            && l.contains("alive")
            && l.contains(&format!("container testkit-{pod_id}"))),
        "{}",
        ls.stdout
    );
    let down = Ran::from(
        runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "down", &name])
            .output()
            .unwrap(),
    );
    assert_eq!(down.code, 0, "{}", down.stderr);
    assert!(
        down.stdout
            .contains(&format!("label testkit.pod={pod_id} lists nothing now")),
        "{}",
        down.stdout
    );
    assert!(labelled("testkit.pod", &pod_id).is_empty());
}

/// A runner SIGKILLed while its container pod is still in its setup (a
/// one-off container that takes its time) leaves nothing in the engine: the
/// watchdog, armed before the boot, removes the setup container, the
/// network and the volume by the pod's label.
#[test]
fn a_runner_sigkilled_during_a_container_setup_leaves_nothing_in_the_engine() {
    let suite = container_fixture_with(SERVE, r#"setup = [["/bin/sh", "-c", "sleep 60"]]"#);
    let pods = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("setup");
    let _guard = EngineGuard(run_id.clone());
    let mut child = runner()
        .env("TESTKIT_PODS_DIR", pods.path())
        .args(["run", "--pod", "container", "--run-id", &run_id])
        .arg(suite.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let in_setup = wait_for(Duration::from_secs(120), || {
        labelled("testkit.run", &run_id)
            .iter()
            .any(|o| o.starts_with("container") && o.contains("-setup-"))
    });
    let before = labelled("testkit.run", &run_id);
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    let _ = child.wait();
    assert!(in_setup, "the setup container ran: {before:?}");
    let gone = wait_for(Duration::from_secs(20), || {
        labelled("testkit.run", &run_id).is_empty()
    });
    eprintln!(
        "timing: {before:?} gone {:?} after the runner's SIGKILL mid-setup",
        killed.elapsed()
    );
    assert!(
        gone,
        "left in the engine: {:?}",
        labelled("testkit.run", &run_id)
    );
}

/// A runner SIGKILLed while its image's context is being prepared leaves no
/// copy of the context behind: its watchdog knew the copy before it was
/// made, and removes it.
#[test]
fn a_runner_sigkilled_during_an_image_build_leaves_no_copy_of_its_context() {
    let suite = container_fixture_section(&format!(
        "build = {{ context = \"container\", prepare = [[\"sh\", \"-c\", \"echo $$ > pid && echo $$ > pid && touch preparing && exec sleep 20\"]] }}\n\
         port = 8080\n\
         command = {SERVE}\n"
    ));
    let tmp = tempfile::tempdir().unwrap();
    let pods = tempfile::tempdir().unwrap();
    let run_id = fresh_run_id("context");
    let _guard = EngineGuard(run_id.clone());
    let mut child = runner()
        .env("TMPDIR", tmp.path())
        .env("TESTKIT_PODS_DIR", pods.path())
        .args(["run", "--pod", "container", "--run-id", &run_id])
        .arg(suite.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let copies = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(tmp.path())
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .starts_with("testkit-context-")
                    })
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    let preparing = wait_for(Duration::from_secs(120), || {
        copies().iter().any(|c| c.join("preparing").exists())
    });
    let prepare: Option<i32> = copies()
        .iter()
        .find_map(|c| std::fs::read_to_string(c.join("pid")).ok())
        .and_then(|p| p.trim().parse().ok());
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    let _ = child.wait();
    assert!(
        preparing,
        "the build's prepare ran in a copy of the context"
    );
    let gone = wait_for(Duration::from_secs(10), || copies().is_empty());
    assert!(gone, "the context's copy was left: {:?}", copies());
    // The prepare command ends with the runner too, by its process group.
    let prepare = prepare.expect("the prepare command wrote its pid");
    let ended = wait_for(Duration::from_secs(10), || {
        kill(Pid::from_raw(prepare), None).is_err()
    });
    assert!(
        ended,
        "the prepare command (pid {prepare}) outlived the runner"
    );
}

/// A published port something else holds is named by the engine's error,
/// from what a real Docker Engine says (its last line is only "Run 'docker
/// run --help'"): a container whose port this test holds does not start,
/// and the error says which port is taken.
#[test]
fn a_taken_published_port_is_named_by_the_engine_error() {
    use testkit_engine::containers::{Engine, EngineKind};
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = held.local_addr().unwrap().port();
    let name = format!("testkit-tests-port-{}", std::process::id());
    docker(&[
        "create",
        "--label",
        "testkit.owner=testkit-tests",
        "--name",
        &name,
        "--publish",
        &format!("127.0.0.1:{port}:80"),
        busybox_image(),
        "/bin/busybox",
        "sleep",
        "60",
    ]);
    let engine = Engine::on_path(EngineKind::Docker).unwrap();
    let started = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(engine.start(&name));
    docker(&["rm", "-f", &name]);
    let error = started.expect_err("the port is taken");
    let taken = error.port_taken().unwrap_or_else(|| {
        panic!(
            "not seen as a taken port: {}",
            testkit_engine::error_chain(&error)
        )
    });
    assert_eq!(
        taken.address,
        Some(format!("127.0.0.1:{port}")),
        "{taken:?}"
    );
    assert!(
        taken.to_string().starts_with(&format!(
            "the published port 127.0.0.1:{port} is already taken"
        )),
        "{taken}"
    );
    drop(held);
}

/// A container engine that does not answer fails the up phase, as the
/// infrastructure's: the summary and `verdict.jsonl` say so.
#[test]
fn an_engine_that_does_not_answer_is_an_infrastructure_failure() {
    let suite = container_fixture(SERVE);
    let ran = Ran::from(
        runner()
            .env("DOCKER_HOST", "unix:///nonexistent/testkit-no-docker.sock")
            .args(["run", "--pod", "container"])
            .arg(suite.path())
            .output()
            .unwrap(),
    );
    assert_ne!(ran.code, 0, "{}", ran.stdout);
    let up = ran
        .verdicts()
        .into_iter()
        .find(|v| v["phase"] == "up")
        .unwrap();
    assert_eq!(up["verdict"], "fail", "{up}");
    assert_eq!(up["category"], "infrastructure", "{up}");
    assert!(
        ran.stdout.contains("FAIL up       [infrastructure]"),
        "{}",
        ran.stdout
    );
}
