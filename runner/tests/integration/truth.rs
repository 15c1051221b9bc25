//! A green verdict is never false: the ways a run could still report a pass
//! it did not see, each run for real against sandboxd.

use std::path::Path;

use testkit_engine::report::{read_records, Outcome, TestRecord};

use crate::{fixture, runner, Ran};

/// Adds the test binary `name` (harness = false) with `source` to the
/// fixture suite copied at `suite`.
fn add_test_binary(suite: &Path, name: &str, source: &str) {
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
