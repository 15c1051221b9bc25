//! Flaky tests are not hidden: a test that fails and then passes on a
//! nextest retry is one flaky pass, not two passes, in the summary, the
//! tests verdict, `junit.xml` (`<flakyFailure>`) and `report.html` (its
//! Flaky section, with the failed attempt's message and log); and
//! `[suite] flaky = "fail"` makes it fail the run. A known issue declared
//! `intermittent = true` may pass, and when it fails must fail as
//! documented.

use std::path::Path;

use testkit_engine::report::{read_records, Outcome};

use crate::truth::add_test_binary;
use crate::{fixture, runner, Ran};

const FLAKY: &str = r#"
use testkit::prelude::*;

/// Loses a race on its first attempt, and wins it on the retry.
#[testkit::test]
async fn fails_once(cx: &mut Cx) -> testkit::Result {
    cx.pod()?;
    let attempt = std::env::var("NEXTEST_ATTEMPT").unwrap_or_default();
    cx.log(format!("attempt {attempt} started"));
    ensure!(attempt != "1", "the widget was not ready on attempt {attempt}");
    Ok(())
}

/// Passes every time.
#[testkit::test]
async fn steady(cx: &mut Cx) -> testkit::Result {
    cx.pod()?;
    Ok(())
}

testkit::main!();
"#;

fn run_with_retries(suite: &Path) -> Ran {
    Ran::from(
        runner()
            .arg("run")
            .arg(suite)
            .args(["-E", "binary(flaky)", "--", "--retries", "1"])
            .output()
            .unwrap(),
    )
}

/// The `<testcase>` of `name` in a JUnit file.
fn testcase<'a>(doc: &'a roxmltree::Document<'a>, name: &str) -> roxmltree::Node<'a, 'a> {
    doc.descendants()
        .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(name))
        .unwrap_or_else(|| panic!("no testcase {name}"))
}

/// A test that fails on its first attempt and passes on its retry (through
/// `testkit-runner run -- --retries 1`) is one pass, and flaky: the run
/// passes, loudly, by default; every attempt is kept and shown; and with
/// `[suite] flaky = "fail"` the same run fails.
#[test]
fn a_test_that_passes_on_its_retry_is_flaky_not_two_passes() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "flaky", FLAKY);

    let ran = run_with_retries(suite.path());
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "pass", "{evidence}");
    assert!(
        evidence.contains("2 passed (1 flaky), 0 failed"),
        "{evidence}"
    );
    assert!(
        ran.stdout.contains("2 tests: 2 passed (1 flaky), 0 failed"),
        "{}",
        ran.stdout
    );
    // Loudly: the summary names the flaky test and says the run passed
    // with it, and how to make it fail instead.
    assert!(
        ran.stdout.contains("flaky: flaky::flaky::fails_once")
            && ran.stdout.contains("failed 1 of 2 attempts")
            && ran.stdout.contains("flaky = \"fail\""),
        "{}",
        ran.stdout
    );
    let results = ran.results();
    let md = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(md.contains("## Flaky"), "{md}");
    assert!(md.contains("flaky::fails_once"), "{md}");

    // Every attempt's record is kept; the reader folds them into one.
    let records = read_records(&results).unwrap();
    let flaky: Vec<_> = records.iter().filter(|r| r.binary == "flaky").collect();
    assert_eq!(flaky.len(), 2, "{flaky:#?}");
    let once = flaky
        .iter()
        .find(|r| r.name == "flaky::fails_once")
        .unwrap();
    assert_eq!(once.outcome, Outcome::Passed, "{once:#?}");
    assert_eq!(once.attempt, 2, "{once:#?}");
    assert_eq!(once.attempts.len(), 1, "{once:#?}");
    assert_eq!(once.attempts[0].attempt, 1);
    assert_eq!(once.attempts[0].outcome, Outcome::Failed);
    assert!(once.is_flaky());

    // JUnit: one passing testcase carrying the failed attempt.
    let text = std::fs::read_to_string(results.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let case = testcase(&doc, "flaky::fails_once");
    assert!(
        !case
            .children()
            .any(|n| n.has_tag_name("failure") || n.has_tag_name("error")),
        "{text}"
    );
    let flaky_failures: Vec<_> = case
        .children()
        .filter(|n| n.has_tag_name("flakyFailure"))
        .collect();
    assert_eq!(flaky_failures.len(), 1, "{text}");
    let message = flaky_failures[0].attribute("message").unwrap_or("");
    assert!(
        message.contains("the widget was not ready on attempt 1"),
        "{text}"
    );
    let attempt_log = flaky_failures[0]
        .children()
        .find(|n| n.has_tag_name("system-out"))
        .and_then(|n| n.text())
        .unwrap_or("");
    assert!(attempt_log.contains("attempt 1 started"), "{text}");
    let steady = testcase(&doc, "flaky::steady");
    assert!(
        !steady.children().any(|n| n.has_tag_name("flakyFailure")),
        "{text}"
    );
    let property = |case: roxmltree::Node, name: &str| {
        case.descendants()
            .find(|n| n.has_tag_name("property") && n.attribute("name") == Some(name))
            .and_then(|n| n.attribute("value"))
            .map(str::to_owned)
    };
    assert_eq!(property(case, "attempts").as_deref(), Some("2"), "{text}");
    assert_eq!(property(case, "flaky").as_deref(), Some("true"), "{text}");

    // report.html: a Flaky section with the failed attempt, its message
    // and its log.
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    let start = html
        .find("<section id=\"flaky\">")
        .unwrap_or_else(|| panic!("no Flaky section in report.html"));
    let section = &html[start..start + html[start..].find("</section>").unwrap()];
    assert!(section.contains("flaky::fails_once"), "{section}");
    assert!(section.contains("attempt 1 of 2"), "{section}");
    assert!(
        section.contains("the widget was not ready on attempt 1"),
        "{section}"
    );
    assert!(section.contains("attempt 1 started"), "{section}");
    assert!(!section.contains("flaky::steady"), "{section}");

    // The suite decides: with `flaky = "fail"`, the same run fails.
    let config = suite.path().join("testkit.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replacen("[suite]\n", "[suite]\nflaky = \"fail\"\n", 1),
    )
    .unwrap();
    let ran = run_with_retries(suite.path());
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(
        evidence.contains(
            "flaky tests fail the run ([suite] flaky = \"fail\"): flaky::flaky::fails_once"
        ),
        "{evidence}"
    );
    assert!(ran.stdout.contains("FAILED"), "{}", ran.stdout);
}

const INTERMITTENT: &str = r#"
use testkit::prelude::*;

fn attempt() -> String {
    std::env::var("NEXTEST_ATTEMPT").unwrap_or_default()
}

/// The bug did not show this time.
#[testkit::test(known_issue = "FLK-1", fails_with = "dropped the reply", intermittent = true)]
async fn did_not_show(_cx: &mut Cx) -> testkit::Result {
    Ok(())
}

/// The bug showed, as documented.
#[testkit::test(known_issue = "FLK-1", fails_with = "dropped the reply", intermittent = true)]
async fn showed(_cx: &mut Cx) -> testkit::Result {
    bail!("the pod dropped the reply")
}

/// Failed for another reason first, then as documented on the retry.
#[testkit::test(known_issue = "FLK-1", fails_with = "dropped the reply", intermittent = true)]
async fn showed_on_retry(cx: &mut Cx) -> testkit::Result {
    cx.log(format!("attempt {} started", attempt()));
    ensure!(attempt() != "1", "connection reset on attempt 1");
    bail!("the pod dropped the reply")
}

/// Fails, but not as documented, every time.
#[testkit::test(known_issue = "FLK-1", fails_with = "dropped the reply", intermittent = true)]
async fn failed_differently(_cx: &mut Cx) -> testkit::Result {
    bail!("the pod answered 500")
}

testkit::main!();
"#;

/// A known issue declared `intermittent = true` does not fail every time:
/// a pass is a pass (the issue was not reproduced), not an unexpected pass;
/// a failure must be the documented one, on every attempt that counts; one
/// that failed differently and then as documented on its retry is flaky,
/// with its attempts.
#[test]
fn an_intermittent_known_issue_may_pass_and_must_fail_as_documented() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "intermittent", INTERMITTENT);
    let known = suite.path().join("KNOWN-ISSUES.md");
    let mut text = std::fs::read_to_string(&known).unwrap();
    text.push_str(
        "\n## FLK-1: the pod sometimes drops a reply\nUnder load, one reply in a few is never sent.\nhttps://bugs.example.com/FLK-1\n",
    );
    std::fs::write(&known, text).unwrap();
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(intermittent)", "--", "--retries", "1"])
            .output()
            .unwrap(),
    );
    // The one that failed differently fails the run.
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let (_, evidence) = ran.verdict("tests");
    assert!(
        evidence.contains(
            "1 passed, 1 failed, 0 skipped, 2 expected failures (1 flaky), 0 unexpected passes"
        ),
        "{evidence}"
    );
    let results = ran.results();
    let records = read_records(&results).unwrap();
    let get = |name: &str| {
        records
            .iter()
            .find(|r| r.name == format!("intermittent::{name}"))
            .unwrap_or_else(|| panic!("no record of {name}: {records:#?}"))
    };
    let passed = get("did_not_show");
    assert_eq!(passed.outcome, Outcome::Passed, "{passed:#?}");
    assert!(passed.intermittent && passed.failure_kind.is_none());
    assert_eq!(get("showed").outcome, Outcome::ExpectedFailure);
    let retried = get("showed_on_retry");
    assert_eq!(retried.outcome, Outcome::ExpectedFailure, "{retried:#?}");
    assert!(retried.is_flaky(), "{retried:#?}");
    assert_eq!(retried.attempts.len(), 1);
    assert!(retried.attempts[0]
        .message
        .as_deref()
        .unwrap_or("")
        .contains("connection reset on attempt 1"));
    let differently = get("failed_differently");
    assert_eq!(differently.outcome, Outcome::Failed, "{differently:#?}");
    assert_eq!(
        differently.failure_kind,
        Some(testkit_engine::report::FailureKind::KnownIssueMismatch)
    );
    assert_eq!(differently.total_attempts(), 2, "{differently:#?}");
    assert!(!differently.is_flaky());
    assert!(
        ran.stdout
            .contains("failed: intermittent::intermittent::failed_differently"),
        "{}",
        ran.stdout
    );

    // JUnit: the pass is a plain pass; the mismatch carries its first
    // attempt as a `<rerunFailure>`.
    let text = std::fs::read_to_string(results.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let pass = testcase(&doc, "intermittent::did_not_show");
    assert!(
        !pass
            .children()
            .any(|n| n.is_element() && n.tag_name().name() != "properties"),
        "{text}"
    );
    let mismatch = testcase(&doc, "intermittent::failed_differently");
    let failure = mismatch
        .children()
        .find(|n| n.has_tag_name("failure"))
        .expect("a failure");
    assert_eq!(failure.attribute("type"), Some("known_issue_mismatch"));
    assert_eq!(
        mismatch
            .children()
            .filter(|n| n.has_tag_name("rerunFailure"))
            .count(),
        1,
        "{text}"
    );

    // report.html: the retried one is flaky, with its failed attempt.
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    let start = html
        .find("<section id=\"flaky\">")
        .expect("a Flaky section");
    let section = &html[start..start + html[start..].find("</section>").unwrap()];
    assert!(
        section.contains("intermittent::showed_on_retry"),
        "{section}"
    );
    assert!(
        section.contains("connection reset on attempt 1"),
        "{section}"
    );
    assert!(section.contains("attempt 1 started"), "{section}");
    assert!(!section.contains("intermittent::did_not_show"), "{section}");
    // The known issue: failing differently (the mismatch) is its worst.
    assert!(
        ran.stdout
            .contains("known issue FLK-1 (the pod sometimes drops a reply): failing differently"),
        "{}",
        ran.stdout
    );
}
