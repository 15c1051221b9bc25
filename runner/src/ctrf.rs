//! `ctrf.json`: the run's tests as a CTRF report (Common Test Report
//! Format, <https://ctrf.io>), beside `junit.xml`, for the tools that read
//! CTRF (its GitHub and GitLab summaries, its Slack and Teams reporters).
//!
//! What testkit says beyond CTRF's words goes where CTRF keeps a
//! reporter's own: each test's `rawStatus` is the record's outcome
//! (`expected_failure` is CTRF's `other`), its `labels` carry the failure
//! `category`, `failure_kind`, `known_issue` and `run_id`, its `tags` the
//! category; earlier attempts are `retryAttempts`; `extra` has the
//! cleanup and the resources. A rerun's line (which run it reran, how many
//! now pass) is the report's `extra.rerun`.

use std::path::Path;

use serde_json::{json, Map, Value};
use testkit_engine::redact::redact;
use testkit_engine::report::{AttemptRecord, Outcome, TestRecord};

/// The file in a results folder.
pub(crate) const FILE: &str = "ctrf.json";

/// The CTRF version the report follows.
const SPEC_VERSION: &str = "1.0.0";

/// CTRF's status of an outcome.
fn status(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Passed => "passed",
        Outcome::Failed | Outcome::UnexpectedPass => "failed",
        Outcome::Skipped => "skipped",
        Outcome::ExpectedFailure => "other",
    }
}

/// The CTRF report of `records` (one run's), `rerun` the line of a run
/// that reran another's failures.
pub(crate) fn report(run_id: &str, records: &[TestRecord], rerun: Option<&str>) -> Value {
    let count = |s: &str| records.iter().filter(|r| status(r.outcome) == s).count();
    let ran = records.iter().filter(|r| r.started_at_ms > 0);
    let now = testkit_engine::resource::journal::now_ms();
    let start = ran.clone().map(|r| r.started_at_ms).min().unwrap_or(now);
    let stop = ran
        .map(|r| r.started_at_ms + r.duration_ms)
        .max()
        .unwrap_or(start);
    let mut suites: Vec<&str> = records.iter().map(|r| r.binary.as_str()).collect();
    suites.sort_unstable();
    suites.dedup();
    let mut extra = Map::new();
    extra.insert("run_id".into(), run_id.into());
    if let Some(rerun) = rerun {
        extra.insert("rerun".into(), rerun.into());
    }
    json!({
        "reportFormat": "CTRF",
        "specVersion": SPEC_VERSION,
        "generatedBy": format!("testkit-runner {}", env!("CARGO_PKG_VERSION")),
        "timestamp": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        "results": {
            "tool": { "name": "testkit", "version": env!("CARGO_PKG_VERSION") },
            "summary": {
                "tests": records.len(),
                "passed": count("passed"),
                "failed": count("failed"),
                "skipped": count("skipped"),
                "pending": 0,
                "other": count("other"),
                "flaky": records.iter().filter(|r| r.is_flaky()).count(),
                "suites": suites.len(),
                "start": start,
                "stop": stop,
                "duration": stop.saturating_sub(start),
            },
            "tests": records.iter().map(test).collect::<Vec<_>>(),
            "extra": extra,
        },
    })
}

fn test(r: &TestRecord) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), r.name.clone().into());
    t.insert("status".into(), status(r.outcome).into());
    t.insert("rawStatus".into(), r.outcome.as_str().into());
    t.insert("duration".into(), r.duration_ms.into());
    if r.started_at_ms > 0 {
        t.insert("start".into(), r.started_at_ms.into());
        t.insert("stop".into(), (r.started_at_ms + r.duration_ms).into());
    }
    t.insert("suite".into(), json!([r.binary]));
    if let Some(message) = r.message.as_deref().or(r.skip_reason.as_deref()) {
        t.insert("message".into(), redact(message).into_owned().into());
    }
    if !r.file.is_empty() {
        t.insert("filePath".into(), r.file.clone().into());
    }
    if r.line > 0 {
        t.insert("line".into(), r.line.into());
    }
    let mut labels = Map::new();
    labels.insert("run_id".into(), r.run_id.clone().into());
    if let Some(category) = r.category() {
        labels.insert("category".into(), category.as_str().into());
        t.insert("tags".into(), json!([category.as_str()]));
    }
    if let Some(kind) = r.failure_kind {
        labels.insert("failure_kind".into(), kind.as_str().into());
    }
    if let Some(id) = &r.known_issue {
        labels.insert("known_issue".into(), id.clone().into());
    }
    t.insert("labels".into(), labels.into());
    if !r.attempts.is_empty() {
        t.insert("retries".into(), r.attempts.len().into());
        t.insert(
            "retryAttempts".into(),
            r.attempts
                .iter()
                .map(attempt)
                .chain(std::iter::once(last_attempt(r)))
                .collect::<Vec<_>>()
                .into(),
        );
    }
    if r.is_flaky() {
        t.insert("flaky".into(), true.into());
    }
    if !r.output.is_empty() {
        let out = redact(&r.output);
        t.insert(
            "stdout".into(),
            out.lines().map(str::to_owned).collect::<Vec<_>>().into(),
        );
    }
    t.insert(
        "extra".into(),
        json!({
            "cleanup": r.cleanup.as_str(),
            "resources": r.resources.iter().map(|res| json!({
                "kind": res.kind, "name": res.name, "state": res.state.as_str(),
            })).collect::<Vec<_>>(),
            "description": r.description,
        }),
    );
    t.into()
}

fn attempt(a: &AttemptRecord) -> Value {
    let mut v = Map::new();
    v.insert("attempt".into(), a.attempt.max(1).into());
    v.insert("status".into(), status(a.outcome).into());
    v.insert("duration".into(), a.duration_ms.into());
    if let Some(message) = &a.message {
        v.insert("message".into(), redact(message).into_owned().into());
    }
    if a.started_at_ms > 0 {
        v.insert("start".into(), a.started_at_ms.into());
        v.insert("stop".into(), (a.started_at_ms + a.duration_ms).into());
    }
    if let Some(category) = a.category {
        v.insert("extra".into(), json!({ "category": category.as_str() }));
    }
    v.into()
}

/// The test's last attempt, as CTRF lists it after the earlier ones.
fn last_attempt(r: &TestRecord) -> Value {
    attempt(&AttemptRecord::of(r))
}

/// Writes `<results>/ctrf.json` of `records`.
pub(crate) fn write(
    results_dir: &Path,
    run_id: &str,
    records: &[TestRecord],
    rerun: Option<&str>,
) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(&report(run_id, records, rerun))
        .map_err(std::io::Error::other)?;
    std::fs::write(results_dir.join(FILE), text)
}
