//! Pods of several nodes on the real Docker Engine: sandboxd's gateway and
//! two workers. A test process SIGKILLed in the middle of each kind of
//! fault has it undone, and proven undone, by its reaper, and the next test
//! finds the cluster whole; a fault whose undo fails is its own failure; a
//! runner SIGKILLed mid-fault leaves no node, network, volume or rule.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{fixture, runner, wait_for, workspace, Ran};

/// The cluster fixture, with sandboxd's image context.
fn cluster_fixture() -> tempfile::TempDir {
    let suite = fixture("cluster");
    crate::copy_dir(
        &workspace().join("suites/conformance/container"),
        &suite.path().join("container"),
    );
    suite
}

/// `docker ARGS`, its stdout (empty when it fails).
fn docker(args: &[&str]) -> String {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Containers, networks and volumes labelled `key=value`, and the packet
/// filter's rules of the pod `pod_id` (when given).
fn left_behind(key: &str, value: &str, pod_id: Option<&str>) -> Vec<String> {
    let mut found = crate::containers::labelled(key, value);
    if let Some(pod) = pod_id {
        found.extend(rules_of(pod).into_iter().map(|r| format!("rule {r}")));
    }
    found
}

/// The `iptables` rules that name the pod `pod_id`.
fn rules_of(pod_id: &str) -> Vec<String> {
    let comment = format!("testkit.pod={pod_id}");
    ["DOCKER-USER", "OUTPUT"]
        .iter()
        .flat_map(|chain| {
            let out = Command::new("iptables")
                .args(["-w", "-S", chain])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            out.lines()
                .filter(|l| l.contains(&comment))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A cluster pod started with `pod up`, stopped (and anything of its label
/// removed) when dropped.
struct ClusterPod {
    pods: tempfile::TempDir,
    name: String,
    pod_id: String,
    handle_file: PathBuf,
}

impl ClusterPod {
    fn up(suite: &Path) -> ClusterPod {
        let pods = tempfile::tempdir().unwrap();
        let up = Ran::from(
            runner()
                .env("TESTKIT_PODS_DIR", pods.path())
                .args(["pod", "up", "--json", "--suite"])
                .arg(suite)
                .output()
                .unwrap(),
        );
        assert_eq!(up.code, 0, "the cluster came up: {}", up.stderr);
        let out: serde_json::Value = serde_json::from_str(up.stdout.trim()).unwrap();
        let name = out["name"].as_str().unwrap().to_owned();
        let handle_file = PathBuf::from(out["handle"].as_str().unwrap());
        let handle: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&handle_file).unwrap()).unwrap();
        let pod_id = handle["cluster"]["pod_id"].as_str().unwrap().to_owned();
        ClusterPod {
            pods,
            name,
            pod_id,
            handle_file,
        }
    }

    /// The container of `node`.
    fn container(&self, node: &str) -> String {
        docker(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=testkit.pod={}", self.pod_id),
            "--filter",
            &format!("label=testkit.node={node}"),
        ])
    }

    /// `running paused` of `node`'s container.
    fn state(&self, node: &str) -> String {
        docker(&[
            "inspect",
            "--format",
            "{{.State.Running}} {{.State.Paused}}",
            &self.container(node),
        ])
    }
}

impl Drop for ClusterPod {
    fn drop(&mut self) {
        let _ = runner()
            .env("TESTKIT_PODS_DIR", self.pods.path())
            .args(["pod", "down", &self.name])
            .output();
        let filter = format!("label=testkit.pod={}", self.pod_id);
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

/// `cargo nextest run -E EXPR` of the fixture against `pod`, results in
/// `results`, `FIXTURE_FAULT=fault`.
fn nextest(suite: &Path, pod: &ClusterPod, results: &Path, expr: &str, fault: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["nextest", "run", "--no-fail-fast", "-E", expr])
        .env("CARGO_TARGET_DIR", crate::shared_target())
        .env("TESTKIT_RESULTS_DIR", results)
        .env("TESTKIT_SECRETS_DIR", results.with_extension("secrets"))
        .env("TESTKIT_POD_HANDLE", &pod.handle_file)
        .env("FIXTURE_FAULT", fault)
        .env("FIXTURE_FLAG", results.join("holding.pid"))
        .current_dir(suite);
    cmd
}

/// The time (ms since the epoch) and event of the journal's last entry of a
/// fault, when there is one that settles it.
fn fault_settled(results: &Path) -> Option<(u64, String)> {
    let dir = results.join("journal");
    let mut last = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            let Ok(e) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let event = e["event"].as_str().unwrap_or_default();
            if e["kind"] == "fault" && matches!(event, "reaped" | "leaked") {
                last = Some((e["time"].as_u64().unwrap_or(0), event.to_owned()));
            }
        }
    }
    last
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Holds `fault` in a test process, SIGKILLs it, and waits for its
/// reaper's proof; the milliseconds from the kill to the proof.
fn kill_mid_fault(suite: &Path, pod: &ClusterPod, fault: &str) -> u64 {
    let results = tempfile::tempdir().unwrap();
    let flag = results.path().join("holding.pid");
    let mut run: Child = nextest(suite, pod, results.path(), "test(hold_fault)", fault)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let held = wait_for(Duration::from_secs(600), || {
        flag.exists() || run.try_wait().unwrap().is_some()
    });
    assert!(
        held && flag.exists(),
        "{fault}: the test injected its fault and is holding it"
    );
    let pid: i32 = std::fs::read_to_string(&flag)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if fault == "pause" {
        assert_eq!(pod.state("worker-1"), "true true", "worker-1 is frozen");
    }
    if matches!(fault, "cut" | "isolate") {
        assert!(
            !rules_of(&pod.pod_id).is_empty(),
            "{fault}: the cut's rules are in place"
        );
    }
    let killed = now_ms();
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    let proven = wait_for(Duration::from_secs(60), || {
        fault_settled(results.path()).is_some()
    });
    let _ = run.wait();
    assert!(proven, "{fault}: the reaper settled the fault within 60 s");
    let (at, event) = fault_settled(results.path()).unwrap();
    assert_eq!(
        event, "reaped",
        "{fault}: the reaper undid it and proved it"
    );
    assert_eq!(
        pod.state("worker-1"),
        "true false",
        "{fault}: worker-1 runs, unfrozen"
    );
    assert!(
        rules_of(&pod.pod_id).is_empty(),
        "{fault}: no rule of the cut is left"
    );
    let whole = nextest(suite, pod, results.path(), "test(cluster_is_whole)", "")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(
        whole.success(),
        "{fault}: the next test finds the cluster whole"
    );
    at.saturating_sub(killed)
}

/// A test process SIGKILLed while it holds each kind of fault: its reaper
/// undoes the fault, proves it undone (the node healthy, its peers reaching
/// it), and the next test finds the whole cluster healthy.
#[test]
fn each_kind_of_fault_of_a_sigkilled_test_is_undone_by_its_reaper() {
    let suite = cluster_fixture();
    let pod = ClusterPod::up(suite.path());
    let mut timings = Vec::new();
    for fault in ["stop", "kill", "pause", "restart", "cut", "isolate"] {
        let took = kill_mid_fault(suite.path(), &pod, fault);
        timings.push(format!("{fault} {took} ms"));
    }
    eprintln!(
        "timing: from SIGKILL to the reaper's proof: {}",
        timings.join(", ")
    );
}

/// A fault whose undo fails (its node's container removed behind testkit's
/// back) fails the test as `fault_not_undone`, naming the node, in the
/// record and in JUnit.
#[test]
fn a_fault_whose_undo_fails_is_its_own_failure_named_on_the_node() {
    let suite = cluster_fixture();
    let results = tempfile::tempdir().unwrap();
    let ran = Ran::from(
        runner()
            .args(["run", "--results"])
            .arg(results.path())
            .arg(suite.path())
            .args(["-E", "test(undo_fails)"])
            .env("FIXTURE_FAULT", "unundoable")
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "the run fails");
    assert!(
        ran.stdout
            .contains("fault not undone: node `worker-2`: stop worker-2"),
        "the summary names the node and the fault: {}",
        ran.stdout
    );
    let junit = std::fs::read_to_string(results.path().join("junit.xml")).unwrap();
    assert!(junit.contains("type=\"fault_not_undone\""), "{junit}");
    assert_eq!(
        pod_verdicts(&ran),
        Vec::<(String, String)>::new(),
        "worker-2's stop was a fault, not a crash"
    );
}

/// A runner SIGKILLed while a test holds a cut leaves nothing: no node, no
/// network, no volume, and no packet-filter rule of its pod.
#[test]
fn a_sigkilled_runner_mid_fault_leaves_no_node_network_volume_or_rule() {
    let suite = cluster_fixture();
    let results = tempfile::tempdir().unwrap();
    let flag = results.path().join("holding.pid");
    let mut run = runner()
        .args(["run", "--results"])
        .arg(results.path())
        .arg(suite.path())
        .args(["-E", "test(hold_fault)"])
        .env("FIXTURE_FAULT", "isolate")
        .env("FIXTURE_FLAG", &flag)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let held = wait_for(Duration::from_secs(600), || {
        flag.exists() || run.try_wait().unwrap().is_some()
    });
    assert!(held && flag.exists(), "the test holds its fault");
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(run.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    let run_id = first
        .trim()
        .strip_prefix("run id: ")
        .expect("the runner names its run first")
        .to_owned();
    let pod_id = docker(&[
        "ps",
        "--filter",
        &format!("label=testkit.run={run_id}"),
        "--format",
        "{{.Label \"testkit.pod\"}}",
    ])
    .lines()
    .next()
    .unwrap_or_default()
    .to_owned();
    let before = left_behind("testkit.run", &run_id, Some(&pod_id));
    for kind in ["container", "network", "volume", "rule"] {
        assert!(
            before.iter().any(|o| o.starts_with(kind)),
            "a {kind} of the run: {before:?}"
        );
    }
    kill(Pid::from_raw(run.id() as i32), Signal::SIGKILL).unwrap();
    let killed = Instant::now();
    let _ = run.wait();
    let gone = wait_for(Duration::from_secs(30), || {
        left_behind("testkit.run", &run_id, Some(&pod_id)).is_empty()
    });
    eprintln!(
        "timing: everything of the run gone {:?} after the runner's SIGKILL",
        killed.elapsed()
    );
    // The test process holding the fault ends with its run (its group is
    // the watchdog's to end); if it did not, it is this test's to end.
    if let Some(pid) = std::fs::read_to_string(&flag)
        .ok()
        .and_then(|p| p.trim().parse().ok())
    {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    assert!(
        gone,
        "left 30 s after the runner's SIGKILL: {:?}",
        left_behind("testkit.run", &run_id, Some(&pod_id))
    );
}

/// Worker-2 with a shell as its PID 1: its sandboxd can die of SIGABRT (a
/// PID 1 without a handler ignores it), and the shell then exits 134.
const WORKER_2_UNDER_A_SHELL: &str = r#"[pod.container.nodes.worker-2]
command = ["/bin/sh", "-c", "/bin/sandboxd serve --home /home/pod --listen {listen} --token-env SANDBOXD_TOKEN --token-window 1h; exit $?"]"#;

/// The `pod` verdicts of a run, each `(verdict, evidence)`.
fn pod_verdicts(ran: &Ran) -> Vec<(String, String)> {
    ran.verdicts()
        .into_iter()
        .filter(|v| v["phase"] == "pod")
        .map(|v| {
            (
                v["verdict"].as_str().unwrap_or_default().to_owned(),
                v["evidence"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Two nodes that exit mid-run behind testkit's back, no fault of a test
/// doing it (worker-1's PID 1 exits 0, worker-2's sandboxd dies of
/// SIGABRT): the run fails with a `pod` verdict naming each node, its exit
/// code, when, its last lines and the test that was running. The entry
/// node, which a test stopped and healed on purpose as a fault, is not
/// named.
#[test]
fn nodes_that_exit_mid_run_fail_it_with_a_pod_verdict_and_a_fault_does_not() {
    let suite = cluster_fixture();
    let toml = suite.path().join("testkit.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    let text = text.replace("[pod.container.nodes.worker-2]", WORKER_2_UNDER_A_SHELL);
    std::fs::write(&toml, text).unwrap();
    let results = tempfile::tempdir().unwrap();
    let ran = Ran::from(
        runner()
            .args(["run", "--results"])
            .arg(results.path())
            .arg(suite.path())
            .args(["-E", "test(nodes_exit) | test(entry_stopped_on_purpose)"])
            .env("FIXTURE_EXIT", "worker-1:term,worker-2:abort")
            .env("FIXTURE_FAULT", "entry")
            .output()
            .unwrap(),
    );
    let (tests, why) = ran.verdict("tests");
    assert_eq!(tests, "pass", "both tests did what they meant to: {why}");
    let pods = pod_verdicts(&ran);
    assert_eq!(pods.len(), 1, "one `pod` verdict: {pods:?}\n{}", ran.stdout);
    let (verdict, evidence) = &pods[0];
    assert_eq!(verdict, "fail", "{evidence}");
    for said in [
        "node `worker-1` exited mid-run",
        "exit code 0",
        "node `worker-2` exited mid-run",
        "exit code 134 (SIGABRT",
        "no fault of a test",
        "while faults::nodes_exit ran (container",
        "its last lines: ",
    ] {
        assert!(evidence.contains(said), "`{said}` in: {evidence}");
    }
    let year = format!(
        " at {}",
        &humantime::format_rfc3339(std::time::SystemTime::now()).to_string()[..4]
    );
    assert_eq!(
        evidence.matches(&year).count(),
        2,
        "when each exited: {evidence}"
    );
    let lifecycle = std::fs::read_to_string(ran.results().join("pod/logs/pod.stdout.log")).unwrap();
    assert!(
        lifecycle.contains(" gateway die"),
        "the fault did stop the entry node: {lifecycle}"
    );
    assert!(
        !evidence.contains("`gateway`"),
        "the stop of a fault is no crash: {evidence}"
    );
    assert_eq!(ran.code, 1, "the run fails");
    assert!(
        ran.stdout.contains("worker-2"),
        "the summary names the node: {}",
        ran.stdout
    );
}

/// The entry node exits mid-run behind testkit's back: the `pod` verdict
/// names it, and residue says it cannot list what the pod's API went
/// with, rather than failing on a refused connection; the run could not
/// complete.
#[test]
fn an_entry_node_that_exits_mid_run_is_a_pod_verdict_and_residue_says_why() {
    let suite = cluster_fixture();
    let results = tempfile::tempdir().unwrap();
    let ran = Ran::from(
        runner()
            .args(["run", "--results"])
            .arg(results.path())
            .arg(suite.path())
            .args(["-E", "test(nodes_exit)"])
            .env("FIXTURE_EXIT", "gateway:term")
            .output()
            .unwrap(),
    );
    let pods = pod_verdicts(&ran);
    assert_eq!(pods.len(), 1, "one `pod` verdict: {pods:?}\n{}", ran.stdout);
    let (verdict, evidence) = &pods[0];
    assert_eq!(verdict, "fail", "{evidence}");
    for said in [
        "the entry node `gateway` exited mid-run",
        "exit code 0",
        "while faults::nodes_exit ran (container",
        "its last lines: ",
    ] {
        assert!(evidence.contains(said), "`{said}` in: {evidence}");
    }
    let (residue, why) = ran.verdict("residue");
    assert_eq!(residue, "skip", "{why}");
    assert!(
        why.contains("the entry node `gateway` exited (see `pod`)"),
        "{why}"
    );
    assert_eq!(ran.code, 2, "the run could not complete");
}
