//! Failure categories: every failure is the product's, the
//! infrastructure's, a known issue's or testkit's own, and says so in the
//! summary, `junit.xml` (property `category`), `report.html` (failures
//! grouped by it) and `ctrf.json`; and `[suite] retry = "infrastructure"`
//! retries only what the infrastructure failed, so that no product bug
//! passes on a retry.

use testkit_engine::report::{read_records, FailureCategory, Outcome, TestRecord};

use crate::truth::add_test_binary;
use crate::{fixture, runner, Ran};

/// One test per category, each on a real failure; each appends its name
/// to `CATEGORIES_LOG` whenever its body runs.
const TESTS: &str = r#"
use testkit::prelude::*;

fn ran(name: &str) {
    use std::io::Write;
    let log = std::env::var("CATEGORIES_LOG").expect("CATEGORIES_LOG");
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    writeln!(f, "{name}").unwrap();
}

/// The product answers what the test does not accept.
#[testkit::test]
async fn product(_cx: &mut Cx) -> testkit::Result {
    ran("product");
    ensure!(1 + 1 == 3, "the pod answered 2 widgets, expected 3");
    Ok(())
}

/// The port the test's webhook receiver needs is taken (on its first
/// attempt: by a listener of its own).
#[testkit::test]
async fn infrastructure(_cx: &mut Cx) -> testkit::Result {
    ran("infrastructure");
    let held = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = held.local_addr()?;
    if std::env::var("NEXTEST_ATTEMPT").as_deref() == Ok("1") {
        let _receiver = std::net::TcpListener::bind(address)
            .with_context(|| format!("cannot start the webhook receiver on {address}"))?;
    }
    Ok(())
}

/// Fails as its known issue documents.
#[testkit::test(known_issue = "FIX-1", fails_with = "one widget too few")]
async fn known_issue(_cx: &mut Cx) -> testkit::Result {
    ran("known_issue");
    bail!("the pod counts one widget too few")
}

/// Pinned to an issue KNOWN-ISSUES.md does not list: a mistake of the
/// suite's, which testkit refuses before the body runs.
#[testkit::test(known_issue = "NOPE-9")]
async fn testkit(_cx: &mut Cx) -> testkit::Result {
    ran("testkit");
    Ok(())
}

testkit::main!();
"#;

fn record<'a>(records: &'a [TestRecord], name: &str) -> &'a TestRecord {
    records
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no record of {name}: {records:#?}"))
}

/// Each test is categorized right, everywhere a failure is shown; under
/// `retries = 1, retry = "infrastructure"` the infrastructure's failure
/// is retried (and passes: flaky), while the product's is not run again
/// and fails as it did, saying why.
#[test]
fn each_failure_has_its_category_and_only_the_infrastructures_is_retried() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "categories", TESTS);
    let toml = suite.path().join("testkit.toml");
    let text = std::fs::read_to_string(&toml).unwrap().replace(
        "name_prefix = \"ct\"",
        "name_prefix = \"ct\"\nretries = 1\nretry = \"infrastructure\"",
    );
    std::fs::write(&toml, text).unwrap();
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("ran.log");

    let ran = Ran::from(
        runner()
            .env("CATEGORIES_LOG", &log)
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(categories)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let results = ran.results();
    let records: Vec<TestRecord> = read_records(&results)
        .unwrap()
        .into_iter()
        .filter(|r| r.run_id == ran.run_id())
        .collect();

    // Which bodies ran, and how often: the retry reran the
    // infrastructure's only.
    let bodies = std::fs::read_to_string(&log).unwrap();
    let count = |name: &str| bodies.lines().filter(|l| *l == name).count();
    assert_eq!(count("infrastructure"), 2, "{bodies}");
    assert_eq!(count("product"), 1, "{bodies}");
    assert_eq!(count("known_issue"), 1, "{bodies}");
    assert_eq!(count("testkit"), 0, "{bodies}");

    let product = record(&records, "categories::product");
    assert_eq!(product.outcome, Outcome::Failed);
    assert_eq!(product.category(), Some(FailureCategory::Product));
    assert_eq!(product.attempt, 2, "{product:#?}");
    let message = product.message.as_deref().unwrap();
    assert!(
        message.starts_with("not retried: attempt 1 failed in the `product` category")
            && message.contains("expected 3"),
        "{message}"
    );

    let infra = record(&records, "categories::infrastructure");
    assert_eq!(infra.outcome, Outcome::Passed, "{infra:#?}");
    assert!(infra.is_flaky());
    assert_eq!(
        infra.attempts[0].category,
        Some(FailureCategory::Infrastructure),
        "{infra:#?}"
    );
    let first = infra.attempts[0].message.as_deref().unwrap();
    assert!(
        first.contains("cannot start the webhook receiver") && first.contains("in use"),
        "{first}"
    );

    let known = record(&records, "categories::known_issue");
    assert_eq!(known.outcome, Outcome::ExpectedFailure);
    assert_eq!(known.category(), Some(FailureCategory::KnownIssue));

    let testkit = record(&records, "categories::testkit");
    assert_eq!(testkit.outcome, Outcome::Failed);
    assert_eq!(testkit.category(), Some(FailureCategory::Testkit));

    // The summary counts and names them by category.
    assert!(
        ran.stdout
            .contains("failures by category: 1 product, 1 testkit"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("failed: categories::categories::product [product]: not retried"),
        "{}",
        ran.stdout
    );
    let (_, evidence) = ran.verdict("tests");
    assert!(evidence.contains("1 flaky"), "{evidence}");
    let tests = ran
        .verdicts()
        .into_iter()
        .find(|v| v["phase"] == "tests")
        .unwrap();
    assert_eq!(tests["category"], "product", "{tests}");

    // JUnit: a `category` property on each testcase that failed or failed
    // as documented.
    let junit = std::fs::read_to_string(results.join("junit.xml")).unwrap();
    let doc = roxmltree::Document::parse(&junit).unwrap();
    for (name, category) in [
        ("categories::product", Some("product")),
        ("categories::infrastructure", None),
        ("categories::known_issue", Some("known_issue")),
        ("categories::testkit", Some("testkit")),
    ] {
        let case = doc
            .descendants()
            .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(name))
            .unwrap_or_else(|| panic!("no testcase {name}"));
        let property = case
            .descendants()
            .find(|n| n.has_tag_name("property") && n.attribute("name") == Some("category"))
            .and_then(|p| p.attribute("value"));
        assert_eq!(property, category, "{name}");
    }

    // The page groups the failures by category.
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    let product_at = html
        .find("id=\"failures-product\"")
        .expect("a product group");
    let testkit_at = html
        .find("id=\"failures-testkit\"")
        .expect("a testkit group");
    assert!(product_at < testkit_at);
    assert!(html.contains("data-category=\"testkit\""));
    // Its phases table gives the failed tests phase its category.
    assert!(
        html.contains("data-phase=\"tests\"><td>tests</td><td class=\"v\">fail</td><td class=\"category\">product</td>"),
        "the tests phase's category is on the page"
    );

    // CTRF: the category is a label and a tag.
    let ctrf: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("ctrf.json")).unwrap()).unwrap();
    let tests = ctrf["results"]["tests"].as_array().unwrap();
    let known = tests
        .iter()
        .find(|t| t["name"] == "categories::known_issue")
        .unwrap();
    assert_eq!(known["status"], "other");
    assert_eq!(known["labels"]["category"], "known_issue");
}
