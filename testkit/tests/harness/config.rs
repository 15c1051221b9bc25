//! A test binary finds its suite's config however it is started, and a
//! config that cannot be used fails every test, pod or not.

use std::ffi::OsStr;

use crate::fixture::{fixture, results_dir};

#[test]
fn a_binary_run_directly_finds_its_suite() {
    // `green` pins a known issue: it passes only when KNOWN-ISSUES.md (at the
    // suite's root) is found, which here nothing but the binary itself can
    // tell: no CARGO_MANIFEST_DIR, no TESTKIT_SUITE_DIR, another directory.
    let fx = fixture("basic");
    let (results, run_id) = results_dir("bare");
    let elsewhere = tempfile::tempdir().unwrap();
    let out = fx.run_binary_bare(
        "green",
        elsewhere.path(),
        &[
            ("TESTKIT_RESULTS_DIR", results.path().as_os_str()),
            ("TESTKIT_RUN_ID", OsStr::new(&run_id)),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(
        out.stdout
            .contains("green::known_issue_as_documented ... ignored"),
        "{}",
        out.describe()
    );
}

#[test]
fn a_broken_config_fails_every_test_even_without_a_pod() {
    let fx = fixture("basic");
    let (results, run_id) = results_dir("badconfig");
    let suite = tempfile::tempdir().unwrap();
    std::fs::copy(
        fx.dir.join("KNOWN-ISSUES.md"),
        suite.path().join("KNOWN-ISSUES.md"),
    )
    .unwrap();
    std::fs::write(suite.path().join("testkit.toml"), "[pod]\ncomand = []\n").unwrap();
    let out = fx.run_binary_bare(
        "green",
        suite.path(),
        &[
            ("TESTKIT_RESULTS_DIR", results.path().as_os_str()),
            ("TESTKIT_RUN_ID", OsStr::new(&run_id)),
            ("TESTKIT_SUITE_DIR", suite.path().as_os_str()),
        ],
    );
    assert_eq!(out.code, 101, "{}", out.describe());
    let records = testkit_engine::report::read_records(results.path()).unwrap();
    let ran: Vec<_> = records
        .iter()
        .filter(|r| {
            r.skip_reason
                .as_deref()
                .is_none_or(|s| !s.starts_with("ignored:"))
        })
        .collect();
    assert!(!ran.is_empty());
    for r in ran {
        assert_eq!(
            r.outcome,
            testkit_engine::report::Outcome::Failed,
            "{}: {r:?}",
            r.name
        );
        let message = r.message.as_deref().unwrap_or_default();
        assert!(
            message.contains("the suite's config cannot be used")
                && message.contains("comand")
                && message.contains("testkit.toml"),
            "{}: {message}",
            r.name
        );
    }
}
