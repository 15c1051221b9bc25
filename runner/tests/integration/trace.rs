//! Traces: a failing test's requests, wait, CLI run, resource events and
//! failure, in order, with statuses, kept under the default policy
//! (`retain-on-failure`), named in its record and its JUnit, drawn in
//! report.html (checked in Chromium), and holding no credential; a passing
//! test keeps none.

use std::path::Path;

use testkit_engine::report::read_records;
use testkit_engine::trace::{EntryKind, Trace};

use super::report::render;
use super::truth::{add_test_binary, only};
use super::{fixture, runner, Ran};

const TRACED: &str = r#"
use testkit::prelude::*;

/// Makes several requests, a wait and a CLI run, then fails.
#[testkit::test]
async fn fails_after_steps(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    // What the trace must not hold, for the outer test to look for.
    let mut secrets: Vec<String> = pod
        .credential_headers()
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    secrets.push(pod.handle().token().to_owned());
    std::fs::write(std::env::var("FIXTURE_SECRETS_OUT")?, secrets.join("\n"))?;

    let listed = pod.client().get(pod.url("/api/sandboxes")).send().await?;
    ensure!(listed.status().is_success(), "list answered {}", listed.status());
    let name = cx.unique_name();
    // The token in a label: sandboxd echoes it back in its answer.
    let token = pod.handle().token().to_owned();
    cx.create("sandbox", &name, async {
        pod.client()
            .post(pod.url("/api/sandboxes"))
            .json(&serde_json::json!({ "name": name, "labels": { "echo": token } }))
            .send()
            .await?
            .error_for_status()
    })
    .await?;
    let missing = pod
        .send(|c| c.get(pod.url("/api/sandboxes/ct-no-such-sandbox")))
        .await?;
    ensure!(missing.status() == 404, "a missing sandbox answered {}", missing.status());
    let mut polls = 0;
    testkit::wait::until(cx, "the sandbox to be listed", testkit::wait::Wait::new(), || {
        polls += 1;
        let n = polls;
        let url = pod.url(&format!("/api/sandboxes/{name}"));
        async move {
            let status = pod.client().get(url).send().await?.status();
            Ok(if n >= 2 && status.is_success() {
                testkit::wait::Check::Done(())
            } else {
                testkit::wait::Check::pending(format!("poll {n}: {status}"))
            })
        }
    })
    .await?;
    let out = cx.cli(&["sandbox", "list"]).await?;
    ensure!(out.success(), "sandbox list failed: {}", out.stderr);
    // A renewal asked for: whether the pod grants it or not, the trace says.
    let _ = pod.renew().await;
    bail!("the last step failed on purpose");
}

/// One request, and a pass: nothing is kept.
#[testkit::test]
async fn passes_quietly(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    pod.client().get(pod.url("/api/sandboxes?limit=7")).send().await?.error_for_status()?;
    Ok(())
}

/// A pass that keeps its trace all the same: the attribute says so.
#[testkit::test(trace = "on")]
async fn passes_with_trace_on(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    pod.client().get(pod.url("/api/sandboxes?limit=9")).send().await?.error_for_status()?;
    Ok(())
}

testkit::main!();
"#;

fn files_named(dir: &Path, name: &str, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_named(&path, name, found);
        } else if path.file_name().is_some_and(|n| n == name) {
            found.push(path);
        }
    }
}

#[test]
fn a_failing_tests_trace_has_every_step_in_order_and_no_secret() {
    check("nextest");
}

/// Under `cargo test` the three tests share a process and run at once:
/// each request is in the trace of the test that sent it, and no other.
#[test]
fn tests_sharing_a_process_each_trace_their_own_requests() {
    check("cargo-test");
}

fn check(engine: &str) {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "traced", TRACED);
    let out = tempfile::tempdir().unwrap();
    let secrets_out = out.path().join("secrets.txt");
    let ran = Ran::from(
        runner()
            .env("TESTKIT_TRACE", "retain-on-failure")
            .env("FIXTURE_SECRETS_OUT", &secrets_out)
            .arg("run")
            .arg(suite.path())
            .args(["--runner", engine])
            .args(only("traced", engine))
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "the failing test fails the run");
    let results = ran.results();
    let records = read_records(&results).unwrap();
    let failed = records
        .iter()
        .find(|r| r.name.ends_with("::fails_after_steps"))
        .expect("a record of fails_after_steps");
    let passed = records
        .iter()
        .find(|r| r.name.ends_with("::passes_quietly"))
        .expect("a record of passes_quietly");

    // A pass under retain-on-failure keeps nothing; one whose attribute
    // says `trace = "on"` keeps its own.
    assert_eq!(passed.trace, None, "{passed:#?}");
    let kept = records
        .iter()
        .find(|r| r.name.ends_with("::passes_with_trace_on"))
        .and_then(|r| r.trace.clone())
        .expect("passes_with_trace_on names its trace");
    let kept = Trace::read(Path::new(&kept)).unwrap();
    let titles = |t: &Trace| {
        t.entries
            .iter()
            .map(|e| e.title.clone())
            .collect::<Vec<_>>()
    };
    assert!(
        titles(&kept).contains(&"GET /api/sandboxes?limit=9 → 200".to_owned()),
        "{kept:#?}"
    );
    assert!(
        !titles(&kept)
            .iter()
            .any(|t| t.contains("ct-no-such-sandbox") || t.contains("limit=7")),
        "another test's request in passes_with_trace_on's trace: {kept:#?}"
    );
    let mut traces = Vec::new();
    files_named(&results, "trace.json", &mut traces);
    assert_eq!(traces.len(), 2, "two traces in the results: {traces:?}");

    let path = failed
        .trace
        .as_deref()
        .expect("the failed test names its trace");
    assert!(traces.iter().any(|t| t == Path::new(path)), "{traces:?}");
    let trace = Trace::read(Path::new(path)).unwrap();
    let steps: Vec<(EntryKind, &str)> = trace
        .entries
        .iter()
        .map(|e| (e.kind, e.title.as_str()))
        .collect();
    eprintln!("{steps:#?}");
    let position = |kind: EntryKind, needle: &str| {
        steps
            .iter()
            .position(|(k, t)| *k == kind && t.contains(needle))
            .unwrap_or_else(|| panic!("no {kind:?} step with {needle:?} in {steps:#?}"))
    };
    assert!(
        !steps
            .iter()
            .any(|(_, t)| t.contains("limit=7") || t.contains("limit=9")),
        "another test's request in the failing test's trace: {steps:#?}"
    );
    if engine == "nextest" {
        // Its own process: the test connected to the pod itself.
        position(EntryKind::Auth, "connected to pod sandboxd-");
    }
    let order = [
        position(EntryKind::Http, "GET /api/sandboxes → 200"),
        // Journaled first, then its request.
        position(EntryKind::Resource, "create sandbox"),
        position(EntryKind::Http, "POST /api/sandboxes → 201"),
        position(
            EntryKind::Http,
            "GET /api/sandboxes/ct-no-such-sandbox → 404",
        ),
        position(EntryKind::Wait, "wait for the sandbox to be listed: done"),
        position(EntryKind::Cli, "sandbox list → exit 0"),
        position(EntryKind::Auth, "asked to renew: "),
        position(EntryKind::Failure, "the last step failed on purpose"),
    ];
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "steps out of order: {order:?} in {steps:#?}"
    );
    let wait = &trace.entries[order[4]];
    assert!(
        wait.detail.contains("poll 1: 200"),
        "the wait's observations: {wait:#?}"
    );
    // Cleanup's requests are traced too: the sandbox deleted after the
    // CLI run.
    let delete = position(EntryKind::Http, "DELETE /api/sandboxes/ct-");
    assert!(delete > order[5], "cleanup's delete comes last: {steps:#?}");
    let post = trace.entries[order[2]].http.as_ref().unwrap();
    assert!(
        post.request_body.contains("[REDACTED]") && post.response_body.contains("[REDACTED]"),
        "the echoed token is redacted in both bodies: {post:#?}"
    );
    assert!(
        post.request_headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("cookie") && v == "[REDACTED]"),
        "the session cookie is blanked: {post:#?}"
    );

    // No credential anywhere in any trace file.
    let secrets = std::fs::read_to_string(&secrets_out).unwrap();
    let secrets: Vec<&str> = secrets
        .lines()
        .flat_map(|l| l.split(['=', ';', ' ']))
        .filter(|s| s.len() >= 8)
        .collect();
    assert!(!secrets.is_empty(), "the fixture wrote its secrets");
    for t in &traces {
        let text = std::fs::read_to_string(t).unwrap();
        for s in &secrets {
            assert!(!text.contains(s), "{} holds a secret", t.display());
        }
    }

    // JUnit attaches it.
    let junit = std::fs::read_to_string(results.join("junit.xml")).unwrap();
    assert!(junit.contains(&format!("[[ATTACHMENT|{path}]]")), "{junit}");

    // report.html draws it: a row per step, the 404, the failure last.
    let dom = render(&results.join("report.html"), "trace", engine);
    let start = dom
        .find("class=\"trace\"")
        .expect("a waterfall on the page");
    let waterfall = &dom[start..];
    let waterfall = &waterfall[..waterfall.find("</article>").unwrap_or(waterfall.len())];
    for needle in [
        "GET /api/sandboxes/ct-no-such-sandbox → 404",
        "sandbox list → exit 0",
        "wait for the sandbox to be listed: done",
        "data-kind=\"failure\"",
        "class=\"tbar http",
    ] {
        assert!(
            waterfall.contains(needle),
            "no {needle:?} in the waterfall: {waterfall}"
        );
    }
    assert!(
        waterfall.rfind("data-kind=\"failure\"") > waterfall.rfind("data-kind=\"cli\""),
        "the failure comes after the CLI run"
    );
    for s in &secrets {
        assert!(!dom.contains(s), "report.html holds a secret");
    }
    // The timeline's bar of the test names it (its label) as its waterfall
    // does: what a click on the bar finds it by.
    let name = &failed.name;
    assert!(
        dom.contains(&format!("class=\"trace\" data-test=\"{name}\"")),
        "the waterfall names its test"
    );
    assert!(
        dom.contains("class=\"bar failed\"") && dom.contains(&format!("data-test=\"{name}\"")),
        "the timeline has the test's bar"
    );
    assert!(
        dom.contains("#timeline .bar::after{content:attr(data-test)}"),
        "bars are labelled"
    );
}
