//! Pods of several nodes on the real Docker Engine: sandboxd's gateway and
//! two workers. A test process SIGKILLed in the middle of each kind of
//! fault has it undone, and proven undone, by its reaper, and the next test
//! finds the cluster whole; a fault whose undo fails is its own failure; a
//! runner SIGKILLed mid-fault leaves no node, network, volume or rule.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::{fixture, run_id_of, runner, wait_for, workspace, Ran};

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

    /// When `node`'s container last started.
    fn started_at(&self, node: &str) -> String {
        docker(&[
            "inspect",
            "--format",
            "{{.State.StartedAt}}",
            &self.container(node),
        ])
    }

    /// What testkit's faults left in `node`'s own network namespace: the
    /// rules that name the pod, and a token bucket at the root of an
    /// interface (entered by its container's process, as the faults are).
    fn in_namespace(&self, node: &str) -> Vec<String> {
        let pid = docker(&[
            "inspect",
            "--format",
            "{{.State.Pid}}",
            &self.container(node),
        ]);
        let inside = |args: &[&str]| {
            Command::new("nsenter")
                .args(["-t", &pid, "-n", "--"])
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        let comment = format!("testkit.pod={}", self.pod_id);
        let mut found: Vec<String> = inside(&["iptables", "-w", "-S"])
            .lines()
            .filter(|l| l.contains(&comment))
            .map(|l| format!("{node}: rule {l}"))
            .collect();
        found.extend(
            inside(&["tc", "qdisc", "show"])
                .lines()
                .filter(|l| l.contains(" tbf "))
                .map(|l| format!("{node}: {l}")),
        );
        found
    }

    /// The KiB free on `node`'s data disk (`/home/pod`), and how many files
    /// of a fill are in it, as the node itself sees them.
    fn disk(&self, node: &str) -> (u64, usize) {
        let id = self.container(node);
        let df = docker(&["exec", &id, "df", "-k", "/home/pod"]);
        let free = df
            .lines()
            .nth(1)
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|f| f.parse().ok())
            .unwrap_or_else(|| panic!("df on {node}: {df}"));
        let listed = docker(&["exec", &id, "ls", "-a", "/home/pod"]);
        let fillers = listed
            .lines()
            .filter(|l| l.starts_with(".testkit-fill"))
            .count();
        (free, fillers)
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

/// `testkit-runner run --results RESULTS SUITE -E EXPR`.
fn run_filtered(suite: &Path, results: &Path, expr: &str) -> Command {
    let mut cmd = runner();
    cmd.args(["run", "--results"])
        .arg(results)
        .arg(suite)
        .args(["-E", expr]);
    cmd
}

/// `cargo nextest run -E EXPR` of the fixture against `pod`, results in
/// `results`, `FIXTURE_FAULT=fault`.
fn nextest(suite: &Path, pod: &ClusterPod, results: &Path, expr: &str, fault: &str) -> Command {
    let mut cmd = crate::fixture_cargo();
    cmd.args(["nextest", "run", "--no-fail-fast", "-E", expr])
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
    let started_before = pod.started_at("worker-1");
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
    // Each fault took, while it is held: a fault that does nothing would
    // leave its undo nothing to prove.
    match fault {
        "pause" => assert_eq!(pod.state("worker-1"), "true true", "worker-1 is frozen"),
        "stop" | "kill" => assert_eq!(
            pod.state("worker-1"),
            "false false",
            "{fault}: worker-1 is down"
        ),
        "restart" => {
            assert_eq!(
                pod.state("worker-1"),
                "true false",
                "restart: worker-1 runs"
            );
            assert_ne!(
                pod.started_at("worker-1"),
                started_before,
                "restart: worker-1 started again"
            );
        }
        _ => {}
    }
    if matches!(fault, "cut" | "isolate" | "partition") {
        assert!(
            !rules_of(&pod.pod_id).is_empty(),
            "{fault}: the cut's rules are in place"
        );
    }
    if fault == "fill-disk" {
        let (free, fillers) = pod.disk("worker-1");
        assert_eq!(free, 0, "fill-disk: no KiB free on worker-1's disk");
        assert_eq!(fillers, 1, "fill-disk: the fault's file is there");
    }
    if matches!(fault, "loss" | "link-loss" | "rate") {
        let inside = pod.in_namespace("worker-1");
        let want = if fault == "rate" {
            " tbf "
        } else {
            "statistic"
        };
        assert!(
            inside.iter().any(|l| l.contains(want)),
            "{fault}: its `{want}` is in worker-1's namespace: {inside:?}"
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
    let inside = pod.in_namespace("worker-1");
    assert!(
        inside.is_empty(),
        "{fault}: nothing is left in worker-1's namespace: {inside:?}"
    );
    let (free, fillers) = pod.disk("worker-1");
    assert!(
        free > 0 && fillers == 0,
        "{fault}: worker-1's disk has room ({free} KiB) and no filler ({fillers})"
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

/// A partition and the link faults (a loss of every packet, a loss on one
/// link, a rate), each held by a test process SIGKILLed: the reaper undoes
/// it and proves it, no rule nor queue left on the host or in the node's
/// namespace. Then the same healed by a test, and the kinds containers
/// cannot carry (netem's) refused, saying where they run.
#[test]
fn partitions_and_link_faults_are_undone_and_netem_kinds_refused() {
    let suite = cluster_fixture();
    let pod = ClusterPod::up(suite.path());
    let mut timings = Vec::new();
    for fault in ["partition", "loss", "link-loss", "rate", "fill-disk"] {
        let took = kill_mid_fault(suite.path(), &pod, fault);
        timings.push(format!("{fault} {took} ms"));
    }
    eprintln!(
        "timing: from SIGKILL to the reaper's proof: {}",
        timings.join(", ")
    );
    let results = tempfile::tempdir().unwrap();
    let expr = "test(link_faults_healed) | test(netem_kinds_are_refused)";
    let out = nextest(suite.path(), &pod, results.path(), expr, "link-heal")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "both passed: {said}");
    // A loss on a path a cut already holds down is refused, not taken.
    let cut = tempfile::tempdir().unwrap();
    let expr = "test(loss_on_a_cut_path_is_refused)";
    let refused = nextest(suite.path(), &pod, cut.path(), expr, "loss-on-cut")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(refused.status.success(), "refused, saying why: {said}");
    assert!(rules_of(&pod.pod_id).is_empty(), "no rule on the host");
    for node in ["gateway", "worker-1", "worker-2"] {
        let inside = pod.in_namespace(node);
        assert!(inside.is_empty(), "nothing left: {inside:?}");
    }
    let journaled: Vec<String> = std::fs::read_dir(results.path().join("journal"))
        .unwrap()
        .flatten()
        .flat_map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .filter(|l| l.contains("\"kind\":\"fault\"") && l.contains("\"event\":\"pending\""))
        .collect();
    assert_eq!(
        journaled.len(),
        3,
        "the partition, the loss and the rate journaled, no refused kind: {journaled:#?}"
    );
    let halves = journaled
        .iter()
        .find(|l| l.contains("random_halves"))
        .expect("the random halves journaled");
    let seed = halves
        .split("\\\"seed\\\":")
        .nth(1)
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .unwrap_or_default();
    assert!(
        !seed.is_empty(),
        "the drawn seed is in the journal: {halves}"
    );
}

/// worker-1's data disk filled by a test: the product's write fails with
/// ENOSPC, and after the heal it fits. A partition bypassed by an ACCEPT
/// ahead of its rules is not taken, though its rules are listed. A loss
/// held while worker-1 is restarted behind testkit's back goes with its
/// old namespace: the undo fails naming the restart, never proving the
/// lost fault undone.
#[test]
fn a_full_disk_a_bypassed_partition_and_a_restart_under_a_link_fault() {
    let suite = cluster_fixture();
    let pod = ClusterPod::up(suite.path());
    // Each part checked whatever the others did: one run shows them all.
    let mut wrong = Vec::new();
    let run = |expr: &str, fault: &str| {
        let results = tempfile::tempdir().unwrap();
        let out = nextest(suite.path(), &pod, results.path(), expr, fault)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.success(), said)
    };
    let (passed, said) = run("test(a_full_disk_fails_the_products_writes)", "disk");
    if !passed {
        wrong.push(format!("the full disk was not seen as it should: {said}"));
    }
    let (passed, said) = run("test(a_bypassed_partition_is_not_taken)", "bypass");
    if !passed {
        wrong.push(format!("a bypassed partition was taken: {said}"));
    }
    let (passed, said) = run("test(link_fault_then_restart)", "link-restart");
    let named = [
        "`worker-1` was restarted",
        "loss of 20% on worker-1",
        "inode",
    ]
    .iter()
    .all(|w| said.contains(w));
    if let Some(line) = said.lines().find(|l| l.contains("was restarted")) {
        eprintln!("the restart, named: {}", line.trim());
    }
    if passed || !named {
        wrong.push(format!(
            "a loss lost with a restart of its node was not a failure naming the restart: {said}"
        ));
    }
    let (free, fillers) = pod.disk("worker-1");
    if free == 0 || fillers > 0 {
        wrong.push(format!(
            "worker-1's disk: {free} KiB free, {fillers} filler"
        ));
    }
    let inside = pod.in_namespace("worker-1");
    if !inside.is_empty() || !rules_of(&pod.pod_id).is_empty() {
        wrong.push(format!("left: {inside:?} {:?}", rules_of(&pod.pod_id)));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
}

/// A fault whose undo fails (its node's container removed behind testkit's
/// back) fails the test as `fault_not_undone`, naming the node, in the
/// record and in JUnit.
#[test]
fn a_fault_whose_undo_fails_is_its_own_failure_named_on_the_node() {
    let suite = cluster_fixture();
    let results = tempfile::tempdir().unwrap();
    let ran = Ran::from(
        run_filtered(suite.path(), results.path(), "test(undo_fails)")
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
    let mut run = run_filtered(suite.path(), results.path(), "test(hold_fault)")
        .env("FIXTURE_FAULT", "loss-isolate")
        .env("FIXTURE_FLAG", &flag)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let held = wait_for(Duration::from_secs(600), || {
        flag.exists() || run.try_wait().unwrap().is_some()
    });
    assert!(held && flag.exists(), "the test holds its fault");
    let run_id = run_id_of(&mut run);
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
    // An empty id would match the rules of every pod on the host.
    assert!(
        !pod_id.is_empty(),
        "the run's containers carry their pod's id"
    );
    let before = left_behind("testkit.run", &run_id, Some(&pod_id));
    // The loss is in worker-1's own namespace, which no rule listing on
    // the host shows: it must end with the namespace.
    let worker_1 = docker(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=testkit.pod={pod_id}"),
        "--filter",
        "label=testkit.node=worker-1",
    ]);
    let netns_pid = docker(&["inspect", "--format", "{{.State.Pid}}", &worker_1]);
    let netns = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/proc/{netns_pid}/ns/net"))
            .expect("worker-1's namespace")
            .ino()
    };
    let loss = Command::new("nsenter")
        .args(["-t", &netns_pid, "-n", "--", "iptables", "-w", "-S"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&loss.stdout).contains("statistic"),
        "the loss is in worker-1's namespace"
    );
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
    let holders = netns_holders(netns);
    assert!(
        holders.is_empty(),
        "worker-1's namespace, with the loss's rules in it, outlived the pod: {holders:?}"
    );
}

/// What still holds the network namespace of inode `inode`: a process
/// in it, or a file the engine keeps it by. None: the namespace, and
/// every rule and queue in it, is gone.
fn netns_holders(inode: u64) -> Vec<String> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let ns = entry.path().join("ns/net");
        if std::fs::metadata(&ns).is_ok_and(|m| m.ino() == inode) {
            found.push(ns.display().to_string());
        }
    }
    for dir in ["/var/run/docker/netns", "/run/docker/netns"] {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if std::fs::metadata(entry.path()).is_ok_and(|m| m.ino() == inode) {
                found.push(entry.path().display().to_string());
            }
        }
    }
    found
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
        run_filtered(
            suite.path(),
            results.path(),
            "test(nodes_exit) | test(entry_stopped_on_purpose)",
        )
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
        run_filtered(suite.path(), results.path(), "test(nodes_exit)")
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

/// The records under `results`, one JSON value each.
fn records(results: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut dirs = vec![results.join("records")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                out.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
            }
        }
    }
    out
}

/// The record of the test `name` (its last, when several), or a panic
/// listing the tests that have one.
fn record_named(results: &Path, name: &str) -> serde_json::Value {
    let all = records(results);
    let full = format!("faults::{name}");
    all.iter()
        .rev()
        .find(|r| r["name"] == name || r["name"] == full.as_str())
        .cloned()
        .unwrap_or_else(|| {
            let names: Vec<&serde_json::Value> = all.iter().map(|r| &r["name"]).collect();
            panic!("no record of {name} in {}: {names:?}", results.display())
        })
}

/// Removes every packet-filter rule of the pod `pod_id`: what a fixture
/// test planted behind testkit's back.
fn remove_rules_of(pod_id: &str) {
    for rule in rules_of(pod_id) {
        let delete = rule.replacen("-A ", "-D ", 1);
        let status = Command::new("sh")
            .args(["-c", &format!("iptables -w {delete}")])
            .status()
            .unwrap();
        assert!(status.success(), "removed the planted rule {rule}");
    }
}

/// Whether some process waits for the `flock` on `path` (a blocked
/// request is listed in /proc/locks with `->`).
fn someone_waits_for(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    let inode = format!(":{} ", meta.ino());
    std::fs::read_to_string("/proc/locks")
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains("->") && l.contains("FLOCK") && l.contains(&inode))
}

/// The faults of one test, against one cluster: several at once are each
/// undone and proven (pause then cut, pause then stop, whose proofs used
/// to run `reach` in the still-frozen node and fail after 30 s); a fault
/// the test undid itself is `gone_before_undo`; a SIGKILLed test's pod lock
/// passes to its reaper, so that the test waiting for the pod starts only
/// once the fault is undone and proven; and two undos that work but whose
/// proof must fail (a peer that cannot reach the started node, a restarted
/// node that answers no health check) fail their tests.
#[test]
fn several_faults_are_undone_the_lock_waits_for_the_reaper_and_a_failing_proof_fails() {
    let suite = cluster_fixture();
    let pod = ClusterPod::up(suite.path());

    // Several faults at once, and one undone behind testkit's back.
    let results = tempfile::tempdir().unwrap();
    let several = nextest(
        suite.path(),
        &pod,
        results.path(),
        "test(pause_then_cut) | test(pause_then_stop) | test(undoes_its_own_fault)",
        "several",
    )
    .output()
    .unwrap();
    for test in ["pause_then_cut", "pause_then_stop"] {
        let record = record_named(results.path(), test);
        assert_eq!(record["outcome"], "passed", "{test}: {record:#}");
        let states: Vec<&serde_json::Value> = record["faults"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| &f["state"])
            .collect();
        assert_eq!(states, ["undone", "undone"], "{test}: {record:#}");
        // The reaper gave the pod lock back when asked.
        let log = record["output"].as_str().unwrap_or_default();
        assert!(
            log.contains("fault undone") && !log.contains("did not let go"),
            "{test}: {record:#}"
        );
    }
    let own = record_named(results.path(), "undoes_its_own_fault");
    assert_eq!(own["outcome"], "passed", "{own:#}");
    assert_eq!(own["faults"][0]["state"], "gone_before_undo", "{own:#}");
    assert!(
        several.status.success(),
        "{}",
        String::from_utf8_lossy(&several.stderr)
    );
    assert_eq!(pod.state("worker-1"), "true false");
    assert_eq!(pod.state("worker-2"), "true false");

    // The pod lock passes to the reaper of a SIGKILLed test.
    let results = tempfile::tempdir().unwrap();
    let flag = results.path().join("holding.pid");
    let mut holder = nextest(
        suite.path(),
        &pod,
        results.path(),
        "test(hold_fault)",
        "pause",
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let held = wait_for(Duration::from_secs(600), || {
        flag.exists() || holder.try_wait().unwrap().is_some()
    });
    assert!(held && flag.exists(), "the test holds its pause");
    let mut waiting = nextest(
        suite.path(),
        &pod,
        results.path(),
        "test(cluster_is_whole)",
        "",
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let lock = results.path().with_extension("secrets").join("pod.lock");
    assert!(
        wait_for(Duration::from_secs(120), || someone_waits_for(&lock)),
        "the next test waits for the pod lock"
    );
    let pid: i32 = std::fs::read_to_string(&flag)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let killed = now_ms();
    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    let _ = holder.wait();
    let next = waiting.wait().unwrap();
    // The next test ended: the reaper settled the fault before it began.
    let (reaped_at, event) = fault_settled(results.path())
        .expect("the reaper settled the fault before the next test ended");
    assert_eq!(event, "reaped");
    let whole = record_named(results.path(), "cluster_is_whole");
    let took = whole["lock"]["acquired_at_ms"].as_u64().unwrap();
    assert!(
        took >= reaped_at,
        "the next test took the pod lock at {took}, before the reaper proved the fault undone \
         at {reaped_at}: {whole:#}"
    );
    assert!(
        next.success(),
        "the next test finds the cluster whole: {whole:#}"
    );
    eprintln!(
        "timing: the reaper held the pod lock {} ms after the SIGKILL (the fault proven undone \
         at +{} ms)",
        took.saturating_sub(killed),
        reaped_at.saturating_sub(killed)
    );

    // Undos that work, proofs that must fail.
    let results = tempfile::tempdir().unwrap();
    let unprovable = nextest(
        suite.path(),
        &pod,
        results.path(),
        "test(stop_then_unreachable) | test(restart_then_unhealthy)",
        "unprovable",
    )
    .output()
    .unwrap();
    let planted = rules_of(&pod.pod_id);
    remove_rules_of(&pod.pod_id);
    assert_eq!(planted.len(), 2, "the two planted rules: {planted:?}");
    assert!(!unprovable.status.success(), "both tests fail");
    for (test, why) in [
        (
            "stop_then_unreachable",
            "`gateway` does not reach `worker-2`",
        ),
        (
            "restart_then_unhealthy",
            "node `worker-1` did not answer its health check",
        ),
    ] {
        let record = record_named(results.path(), test);
        assert_eq!(
            record["failure_kind"], "fault_not_undone",
            "{test}: {record:#}"
        );
        let message = record["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{test}: {why}: {record:#}");
        assert_eq!(record["faults"][0]["state"], "not_undone", "{record:#}");
    }
    let whole = nextest(
        suite.path(),
        &pod,
        results.path(),
        "test(cluster_is_whole)",
        "",
    )
    .stdout(Stdio::null())
    .status()
    .unwrap();
    assert!(
        whole.success(),
        "the cluster is whole once the rules are gone"
    );
}

/// One run of the runner: a test process sent SIGTERM while it holds a
/// pause thaws it and is recorded "terminated (SIGTERM), cleanup
/// verified", not killed; a test process SIGKILLed while it holds a stop
/// whose proof takes 30 s to fail leaves its reaper working, and the
/// runner waits for that reaper before it sweeps for residue and takes the
/// pod down.
#[test]
fn a_sigterm_is_recorded_as_such_and_the_run_waits_for_a_reaper() {
    let suite = cluster_fixture();
    let results = tempfile::tempdir().unwrap();
    let flag = results.path().join("holding.pid");
    let slow_flag = results.path().join("slow.pid");
    let mut run = run_filtered(
        suite.path(),
        results.path(),
        "test(hold_fault) | test(hold_slow_fault)",
    )
    .env("FIXTURE_FAULT", "pause")
    .env("FIXTURE_FLAG", &flag)
    .env("FIXTURE_SLOW_FLAG", &slow_flag)
    // One at a time, in name order: `hold_fault` first, so that the
    // rule `hold_slow_fault` plants breaks no proof of the other.
    .args(["--", "--test-threads", "1"])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let pid_of = |path: &Path| -> i32 {
        std::fs::read_to_string(path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    fn hold(run: &mut Child, flag: &Path, what: &str) {
        wait_for(Duration::from_secs(600), || {
            flag.exists() || run.try_wait().unwrap().is_some()
        });
        if !flag.exists() {
            let _ = run.kill();
            let mut out = String::new();
            for pipe in [
                run.stdout
                    .take()
                    .map(|p| Box::new(p) as Box<dyn std::io::Read>),
                run.stderr
                    .take()
                    .map(|p| Box::new(p) as Box<dyn std::io::Read>),
            ]
            .into_iter()
            .flatten()
            {
                let mut pipe = pipe;
                let _ = pipe.read_to_string(&mut out);
            }
            panic!("{what}: the run ended first:\n{out}");
        }
    }
    hold(&mut run, &flag, "hold_fault holds its pause");
    kill(Pid::from_raw(pid_of(&flag)), Signal::SIGTERM).unwrap();
    hold(&mut run, &slow_flag, "hold_slow_fault holds its stop");
    let slow_pid = pid_of(&slow_flag);
    kill(Pid::from_raw(slow_pid), Signal::SIGKILL).unwrap();
    let done = wait_for(Duration::from_secs(600), || {
        run.try_wait().unwrap().is_some()
    });
    if !done {
        let _ = run.kill();
    }
    let ran = Ran::from(run.wait_with_output().unwrap());
    assert!(done, "the run ended");

    let terminated = record_named(results.path(), "hold_fault");
    let message = terminated["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("terminated (SIGTERM), cleanup verified"),
        "{terminated:#}"
    );
    assert!(!message.contains("SIGKILL"), "{terminated:#}");
    let killed = record_named(results.path(), "hold_slow_fault");
    let message = killed["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("killed"), "{killed:#}");

    // The reaper of the killed test settled its fault (it could not prove
    // it: the planted rule), before the residue sweep began.
    let journal = results.path().join("journal");
    let reaper_log = std::fs::read_dir(&journal)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.to_string_lossy()
                .ends_with(&format!("-{slow_pid}.reaper.log"))
        })
        .map(|p| std::fs::read_to_string(p).unwrap())
        .expect("the killed test's reaper log");
    let (settled_at, event) = fault_settled(results.path())
        .unwrap_or_else(|| panic!("the reaper settled the stop: {reaper_log}"));
    assert_eq!(
        event, "leaked",
        "the planted rule fails the proof: {reaper_log}"
    );
    assert!(
        reaper_log.contains("`gateway` does not reach `worker-2`")
            && !reaper_log.contains("No such container"),
        "the reaper failed on the planted rule, not on a pod taken down under it: {reaper_log}"
    );
    let verdicts = std::fs::read_to_string(results.path().join("verdict.jsonl")).unwrap();
    let residue: serde_json::Value = verdicts
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["phase"] == "residue")
        .unwrap_or_else(|| panic!("a residue verdict: {verdicts}"));
    let residue_began = residue["at"].as_u64().unwrap() - residue["duration_ms"].as_u64().unwrap();
    assert!(
        residue_began >= settled_at,
        "the residue sweep began at {residue_began}, before the reaper settled the fault at \
         {settled_at}: {}",
        ran.stderr
    );
}

/// The cluster suite itself (`suites/cluster`), copied with sandboxd's
/// image context and testkit at this checkout; the gateway given `extra`
/// arguments.
fn cluster_suite(gateway_extra: &[&str]) -> tempfile::TempDir {
    let suite = tempfile::Builder::new()
        .prefix("runner-cluster-suite-")
        .tempdir()
        .unwrap();
    crate::copy_dir(&workspace().join("suites/cluster"), suite.path());
    crate::copy_dir(
        &workspace().join("suites/conformance/container"),
        &suite.path().join("container"),
    );
    let edit = |file: &str, from: &str, to: &str| {
        let path = suite.path().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} holds {from}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    };
    let testkit = format!(
        "path = {:?}",
        workspace().join("testkit").display().to_string()
    );
    edit("Cargo.toml", "path = \"../../testkit\"", &testkit);
    edit(
        "testkit.toml",
        "context = \"../conformance/container\"",
        "context = \"container\"",
    );
    let extra: String = gateway_extra.iter().map(|a| format!(" {a:?},")).collect();
    edit(
        "testkit.toml",
        "\"--role\", \"gateway\",",
        &format!("\"--role\", \"gateway\",{extra}"),
    );
    suite
}

/// The cluster suite's register test (three clients, 150 operations,
/// worker-2 partitioned off and a lossy link between the gateway and
/// worker-1) passes its linearizability check against sandboxd as it is;
/// with the planted bug switched on (`--fault stale-file-reads`: the
/// gateway answers file reads from its own cache, which a write on the
/// worker directly leaves stale), the check fails the test with the
/// operations that conflict drawn, and every fault is still undone.
#[test]
fn the_register_check_passes_and_catches_a_gateway_that_serves_stale_reads() {
    const TEST: &str = "a_register_under_a_partition_and_a_lossy_link_stays_linearizable";
    for (extra, planted) in [
        (&[][..], false),
        (&["--fault", "stale-file-reads"][..], true),
    ] {
        let suite = cluster_suite(extra);
        let results = tempfile::tempdir().unwrap();
        let ran = Ran::from(
            run_filtered(suite.path(), results.path(), &format!("test({TEST})"))
                .output()
                .unwrap(),
        );
        let record = record_named(&ran.results(), TEST);
        let message = record["message"].as_str().unwrap_or_default();
        let faults = record["faults"].as_array().cloned().unwrap_or_default();
        assert_eq!(faults.len(), 2, "a partition and a loss: {record}");
        for f in &faults {
            assert_eq!(f["state"], "undone", "{f}");
        }
        if !planted {
            assert_eq!(record["outcome"], "passed", "{message}\n{}", ran.stdout);
            assert_eq!(ran.code, 0, "{}", ran.stdout);
            continue;
        }
        assert_eq!(
            record["outcome"], "failed",
            "the planted bug is caught: {record}"
        );
        for said in [
            "register check failed: key \"register\" is not linearizable",
            "have no legal order",
        ] {
            assert!(message.contains(said), "`{said}` in: {message}");
        }
        assert!(
            message.contains("cannot come next") || message.contains("no operation can come first"),
            "the conflict named: {message}"
        );
        assert_eq!(ran.code, 1, "{}", ran.stdout);
        // report.html draws the failing part as lanes, the conflict marked
        // (when the search named one).
        let page = std::fs::read_to_string(ran.results().join("report.html")).unwrap();
        assert!(
            page.contains("<figure class=\"history-lanes\">"),
            "the lanes are in report.html"
        );
        assert!(
            page.contains(" conflict\"") || !message.contains("cannot come next"),
            "the conflict is marked in report.html"
        );
    }
}
