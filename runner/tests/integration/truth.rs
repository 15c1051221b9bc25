//! A green verdict is never false: the ways a run could still report a pass
//! it did not see, each run for real against sandboxd.

use std::path::Path;

use testkit_engine::report::{read_records, Outcome, TestRecord};

use crate::{fixture, runner, Ran};

/// Adds the test binary `name` (harness = false) with `source` to the
/// fixture suite copied at `suite`.
pub(crate) fn add_test_binary(suite: &Path, name: &str, source: &str) {
    std::fs::write(suite.join(format!("tests/{name}.rs")), source).unwrap();
    let manifest = suite.join("Cargo.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str(&format!(
        "\n[[test]]\nname = \"{name}\"\npath = \"tests/{name}.rs\"\nharness = false\n"
    ));
    std::fs::write(&manifest, text).unwrap();
}

fn record<'a>(records: &'a [TestRecord], binary: &str, name: &str) -> &'a TestRecord {
    records
        .iter()
        .find(|r| r.binary == binary && r.name == name)
        .unwrap_or_else(|| panic!("no record of {binary}::{name} in {records:#?}"))
}

const EXITS: &str = r#"
use testkit::prelude::*;

/// Ends its process halfway, with status 0: it never finished.
#[testkit::test]
async fn exits_halfway(cx: &mut Cx) -> testkit::Result {
    cx.pod()?;
    std::process::exit(0)
}

testkit::main!();
"#;

/// A test that calls `std::process::exit(0)` halfway did not pass, under
/// either engine: nextest's "ok" and cargo test's silence are not records.
#[test]
fn a_test_that_exits_halfway_is_not_a_pass() {
    for engine in ["nextest", "cargo-test"] {
        let suite = fixture("suite");
        add_test_binary(suite.path(), "exits", EXITS);
        let ran = Ran::from(
            runner()
                .arg("run")
                .arg(suite.path())
                .args(["--runner", engine])
                .output()
                .unwrap(),
        );
        assert_eq!(ran.code, 1, "{engine}: {}", ran.stdout);
        assert!(ran.stdout.contains("FAILED"), "{engine}: {}", ran.stdout);
        let records = read_records(&ran.results()).unwrap();
        let exited = record(&records, "exits", "exits::exits_halfway");
        assert_eq!(exited.outcome, Outcome::Failed, "{engine}: {exited:#?}");
        assert!(
            exited
                .message
                .as_deref()
                .unwrap_or("")
                .contains("no record"),
            "{engine}: {exited:#?}"
        );
        // The rest of the suite is still counted as it ran.
        assert_eq!(
            record(&records, "basics", "basics::capabilities_answer").outcome,
            Outcome::Passed,
            "{engine}"
        );
    }
}

/// When the residue cannot be listed, what the tests left is unknown, not
/// none: the run could not complete (exit 2), and the summary says so.
#[test]
fn a_residue_listing_that_fails_is_unknown_not_none() {
    let suite = fixture("suite");
    let config = suite.path().join("testkit.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    // A kind whose listing the pod does not serve: every list answers 404.
    text.push_str(
        "\n[resources.widget]\nexists = \"GET /api/widgets/{name}\"\n\
         delete = \"DELETE /api/widgets/{name}\"\n\
         list = \"GET /api/widgets?prefix={prefix}\"\nlist_names = \"/items/*/name\"\n",
    );
    std::fs::write(&config, text).unwrap();
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(basics)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    let (verdict, evidence) = ran.verdict("residue");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(evidence.contains("widget"), "{evidence}");
    assert!(evidence.contains("unknown"), "{evidence}");
    assert!(!ran.stdout.contains("leaks: none"), "{}", ran.stdout);
    assert!(ran.stdout.contains("leaks: unknown"), "{}", ran.stdout);
}

/// A tmpfs of `size` mounted at a new temp dir, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount(8) runs");
        // A full disk is a guarantee this test must check: without the
        // right to mount a tmpfs (root), it fails rather than skips.
        assert!(
            status.success(),
            "mounting a {size} tmpfs needs root: {status}"
        );
        SmallDisk { dir }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: the temp dir's own cleanup may still hold it a moment.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A results folder on a full disk: the outputs the run promised were not
/// written, so the run could not complete (exit 2), and says which.
#[test]
fn a_full_disk_fails_the_run() {
    let suite = fixture("suite");
    let disk = SmallDisk::mount("64k");
    let results = disk.dir.path().join("results");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .arg("--results")
            .arg(&results)
            .args(["-E", "binary(basics)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    assert!(!ran.stdout.contains("PASSED"), "{}", ran.stdout);
    assert!(ran.stdout.contains("INCOMPLETE"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("NOT WRITTEN") && ran.stdout.contains("No space left on device"),
        "{}",
        ran.stdout
    );
}
