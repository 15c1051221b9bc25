//! A pod's teardown removes the packet-filter rules its faults left, found
//! by their comment: only those whose whole comment is the pod's. Needs
//! root and `iptables`, as cutting a node off does. The rules drop packets
//! to 192.0.2.77 (TEST-NET-1), to which nothing is sent.

use std::process::Command;

use testkit_engine::pod::fault::{remove_pod_rules, rule_comment};

const DEST: &str = "192.0.2.77/32";

fn iptables(args: &[&str]) -> std::process::Output {
    let program = ["/usr/sbin/iptables", "/sbin/iptables"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .unwrap_or("iptables");
    Command::new(program)
        .arg("-w")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("this test needs `iptables` (as root): {e}"))
}

fn rule(op: &str, comment: &str) -> Vec<String> {
    [
        op,
        "OUTPUT",
        "-d",
        DEST,
        "-m",
        "comment",
        "--comment",
        comment,
        "-j",
        "DROP",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn listed(comment: &str) -> bool {
    let out = iptables(&["-S", "OUTPUT"]);
    String::from_utf8_lossy(&out.stdout).lines().any(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        words
            .windows(2)
            .any(|w| w[0] == "--comment" && w[1].trim_matches('"') == comment)
    })
}

/// Deletes the rules of the test, whatever happened.
struct Guard(Vec<String>);

impl Drop for Guard {
    fn drop(&mut self) {
        for comment in &self.0 {
            while listed(comment) {
                let args = rule("-D", comment);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                if !iptables(&args).status.success() {
                    break;
                }
            }
        }
    }
}

/// A rule whose comment merely holds `testkit.pod=<id>` (another pod's,
/// `testkit.pod=<id>-admin`) is left alone by the pod's teardown and not
/// reported as the pod's own; the pod's own rule is removed.
#[test]
fn teardown_removes_the_pods_own_rules_and_leaves_a_longer_comment() {
    let pod_id = format!("pf{}", std::process::id());
    let own = rule_comment(&pod_id);
    let foreign = format!("{own}-admin");
    let _guard = Guard(vec![own.clone(), foreign.clone()]);
    for comment in [&own, &foreign] {
        let args = rule("-A", comment);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = iptables(&args);
        assert!(
            out.status.success(),
            "this test needs root and iptables: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(listed(comment), "{comment} was added");
    }

    let removed = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(remove_pod_rules(&pod_id))
        .unwrap();

    assert_eq!(removed.len(), 1, "the pod's one rule: {removed:?}");
    assert!(removed[0].contains(&own), "{removed:?}");
    assert!(!removed[0].contains(&foreign), "{removed:?}");
    assert!(!listed(&own), "the pod's rule is gone");
    assert!(listed(&foreign), "the other pod's rule is left");
    let args = rule("-D", &foreign);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(iptables(&args).status.success());
    assert!(!listed(&foreign));
}

/// A check the packet filter cannot answer (here: the namespace it is to
/// look in is gone with its process) is an error naming why, never "the
/// rule is absent": an undo read as proven while its rule stays would be
/// a false green. iptables' own "no such rule" answer is absent.
#[test]
fn a_check_that_fails_is_an_error_and_only_no_such_rule_is_absent() {
    use testkit_engine::containers::{PacketFilter, Rule};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let comment = format!("testkit.pod=pfcheck{}", std::process::id());
    let rule = Rule::drop("OUTPUT", None, "192.0.2.78", &comment);

    let host = PacketFilter::on_host().expect("this test needs iptables");
    assert!(
        !rt.block_on(host.holds(&rule)).expect("iptables answers"),
        "a rule never inserted is absent"
    );

    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let filter = PacketFilter::in_namespace_of(pid).expect("this test needs nsenter");
    let checked = rt.block_on(filter.holds(&rule));
    let why = format!("{:?}", checked);
    assert!(checked.is_err(), "a failed check read as an answer: {why}");
    assert!(why.contains("/proc/"), "the error names its cause: {why}");
    let removed = rt.block_on(filter.remove(&rule));
    assert!(
        removed.is_err(),
        "a remove whose check failed read as nothing to remove: {removed:?}"
    );
}
