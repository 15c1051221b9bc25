//! Rerunning what failed: `run --from DIR` and `run --last-failed` run
//! exactly the tests that failed, were killed or never ran in a run (of a
//! results folder, of a merged one, the suite's latest), say which run
//! they reran and how many of those now pass; with nothing to rerun they
//! say so and start no pod. The run's CTRF report and its Chrome trace
//! are checked against their formats on the way.

use std::collections::BTreeSet;
use std::path::Path;

use testkit_engine::report::{read_records, Outcome};

use crate::truth::add_test_binary;
use crate::{fixture, runner, Ran};

/// Ten tests: `a` and `b` fail while the file `RERUN_AB` names exists, `c`
/// while `RERUN_C`'s does; each appends its name to `RERUN_LOG`.
const TESTS: &str = r#"
use testkit::prelude::*;

fn ran(name: &str) -> bool {
    use std::io::Write;
    let log = std::env::var("RERUN_LOG").expect("RERUN_LOG");
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    writeln!(f, "{name}").unwrap();
    true
}

fn marked(var: &str) -> bool {
    std::env::var(var).is_ok_and(|p| std::path::Path::new(&p).exists())
}

/// Fails while RERUN_AB is there.
#[testkit::test]
async fn a(_cx: &mut Cx) -> testkit::Result {
    ensure!(ran("a") && !marked("RERUN_AB"), "a: the widget is missing");
    Ok(())
}

/// Fails while RERUN_AB is there.
#[testkit::test]
async fn b(_cx: &mut Cx) -> testkit::Result {
    ensure!(ran("b") && !marked("RERUN_AB"), "b: the widget is missing");
    Ok(())
}

/// Fails while RERUN_C is there.
#[testkit::test]
async fn c(_cx: &mut Cx) -> testkit::Result {
    ensure!(ran("c") && !marked("RERUN_C"), "c: the gadget is missing");
    Ok(())
}

macro_rules! passing {
    ($($name:ident),*) => {$(
        /// Passes.
        #[testkit::test]
        async fn $name(_cx: &mut Cx) -> testkit::Result {
            ensure!(ran(stringify!($name)), "unreachable");
            Ok(())
        }
    )*};
}

passing!(p1, p2, p3, p4, p5, p6, p7);

testkit::main!();
"#;

/// The suite, its markers and the log of which tests ran.
struct Setup {
    suite: tempfile::TempDir,
    ab: std::path::PathBuf,
    c: std::path::PathBuf,
    log: std::path::PathBuf,
}

impl Setup {
    fn run(&self, args: &[&str]) -> Ran {
        let _ = std::fs::remove_file(&self.log);
        Ran::from(
            runner()
                .env("RERUN_AB", &self.ab)
                .env("RERUN_C", &self.c)
                .env("RERUN_LOG", &self.log)
                .arg("run")
                .arg(self.suite.path())
                .args(args)
                .output()
                .unwrap(),
        )
    }

    /// The tests that ran, by the log they wrote.
    fn ran(&self) -> BTreeSet<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The records of the run `ran`, by test name (`rerun::x`).
fn outcomes(ran: &Ran) -> Vec<(String, Outcome)> {
    let mut out: Vec<(String, Outcome)> = read_records(&ran.results())
        .unwrap()
        .into_iter()
        .filter(|r| r.run_id == ran.run_id())
        .map(|r| (r.name, r.outcome))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A suite with 3 failing tests of 10: `--from` its folder reruns exactly
/// those 3, and says that 2 now pass; `--last-failed` reruns what the
/// latest run of the suite left failing (1); `--from` a merged folder
/// (junit.xml only) reruns the 3 again; with nothing left to rerun,
/// `--last-failed` says so, exits 0 and starts no pod.
#[test]
fn a_rerun_runs_exactly_what_failed_from_a_folder_a_merge_and_the_last_run() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "rerun", TESTS);
    let marks = tempfile::tempdir().unwrap();
    let setup = Setup {
        ab: marks.path().join("ab"),
        c: marks.path().join("c"),
        log: marks.path().join("ran.log"),
        suite,
    };
    std::fs::write(&setup.ab, "").unwrap();
    std::fs::write(&setup.c, "").unwrap();
    let only = ["-E", "binary(rerun)"];

    // The first run: 3 of 10 fail.
    let first = setup.run(&only);
    assert_eq!(first.code, 1, "{}", first.stdout);
    assert_eq!(setup.ran().len(), 10, "{:?}", setup.ran());
    let failed: Vec<String> = outcomes(&first)
        .into_iter()
        .filter(|(_, o)| *o == Outcome::Failed)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(failed, ["rerun::a", "rerun::b", "rerun::c"]);
    check_ctrf(&first.results());
    check_trace(&first.results());

    // From its folder: exactly those 3; a and b pass now.
    std::fs::remove_file(&setup.ab).unwrap();
    let from = setup.run(&["--from", first.results().to_str().unwrap()]);
    assert_eq!(from.code, 1, "{}", from.stdout);
    assert_eq!(setup.ran(), names(&["a", "b", "c"]));
    let outcome = outcomes(&from);
    assert_eq!(outcome.len(), 3, "{outcome:?}");
    let line = format!(
        "rerun of run {} in {}: 3 tests (3 failed): 2 now pass, 1 fail again",
        first.run_id(),
        first.results().display()
    );
    assert!(from.stdout.contains(&line), "{}", from.stdout);
    assert!(
        from.stdout
            .contains("rerunning 3 tests that failed, were killed or never ran"),
        "{}",
        from.stdout
    );
    let results = from.results();
    let md = std::fs::read_to_string(results.join("summary.md")).unwrap();
    assert!(md.contains(&line), "{md}");
    let junit = std::fs::read_to_string(results.join("junit.xml")).unwrap();
    assert!(
        junit.contains("name=\"rerun_of\"") && junit.contains(&format!("run {}", first.run_id())),
        "{junit}"
    );
    assert!(junit.contains("2 now pass"), "{junit}");
    let html = std::fs::read_to_string(results.join("report.html")).unwrap();
    assert!(
        html.contains("2 now pass, 1 fail again"),
        "the page says it"
    );
    let ctrf: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(results.join("ctrf.json")).unwrap()).unwrap();
    assert_eq!(ctrf["results"]["extra"]["rerun"], line.as_str());

    // The suite's latest run left c failing: --last-failed reruns c alone,
    // and it passes now.
    std::fs::remove_file(&setup.c).unwrap();
    let last = setup.run(&["--last-failed"]);
    assert_eq!(last.code, 0, "{}", last.stdout);
    assert_eq!(setup.ran(), names(&["c"]));
    assert!(
        last.stdout.contains(&format!(
            "rerun of run {} in {}: 1 tests (1 failed): 1 now pass",
            from.run_id(),
            from.results().display()
        )),
        "{}",
        last.stdout
    );

    // Nothing failed in the latest run: nothing is rerun, and it says so.
    let nothing = setup.run(&["--last-failed"]);
    assert_eq!(nothing.code, 0, "{}", nothing.stdout);
    assert!(
        nothing.stdout.contains(&format!(
            "nothing to rerun: run {} in {} has no test that failed, was killed or never ran \
             (1 tests); no pod was started",
            last.run_id(),
            last.results().display()
        )),
        "{}",
        nothing.stdout
    );
    assert!(!nothing.stdout.contains("run id:"), "{}", nothing.stdout);
    assert!(setup.ran().is_empty(), "{:?}", setup.ran());

    // A merged folder (a CI artifact of shards: junit.xml, no records)
    // reruns the 3 that failed in the first run.
    let merged = tempfile::tempdir().unwrap();
    let merge = Ran::from(
        runner()
            .arg("merge")
            .arg(merged.path())
            .arg(first.results())
            .output()
            .unwrap(),
    );
    assert_eq!(merge.code, 0, "{}", merge.stderr);
    std::fs::write(&setup.ab, "").unwrap();
    let again = setup.run(&["--from", merged.path().to_str().unwrap()]);
    assert_eq!(again.code, 1, "{}", again.stdout);
    assert_eq!(setup.ran(), names(&["a", "b", "c"]));
    assert_eq!(outcomes(&again).len(), 3);
    assert!(
        again
            .stdout
            .contains("3 tests (3 failed): 1 now pass, 2 fail again"),
        "{}",
        again.stdout
    );
}

/// `ctrf.json` is valid against CTRF's published JSON schema (a copy in
/// `tests/data/ctrf.schema.json`, from github.com/ctrf-io/ctrf at
/// 84ddec5, MIT), read by Python's jsonschema; and it counts what the
/// records say.
pub(crate) fn check_ctrf(results: &Path) {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ctrf.schema.json");
    let report = results.join("ctrf.json");
    let python = test_support::python_with("jsonschema-venv", "jsonschema==4.23.0", "jsonschema");
    let script = "import json, sys, jsonschema\n\
        schema = json.load(open(sys.argv[1]))\n\
        doc = json.load(open(sys.argv[2]))\n\
        v = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)\n\
        errors = sorted(v.iter_errors(doc), key=str)\n\
        for e in errors: print(list(e.absolute_path), e.message)\n\
        s = doc['results']['summary']\n\
        print('counts', s['tests'], s['passed'], s['failed'], s['skipped'], s['other'])\n\
        sys.exit(1 if errors else 0)\n";
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(&schema)
        .arg(&report)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} is not valid CTRF: {stdout}{}",
        report.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("counts 10 7 3 0 0"), "{stdout}");
    // A schema that takes anything would check nothing: it refuses a
    // report without its format.
    let mut broken: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    broken["results"]["tests"][0]["status"] = "green".into();
    let bad = results.join("ctrf.broken.json");
    std::fs::write(&bad, broken.to_string()).unwrap();
    let python = test_support::python_with("jsonschema-venv", "jsonschema==4.23.0", "jsonschema");
    let refused = std::process::Command::new(python)
        .args(["-c", script])
        .arg(&schema)
        .arg(&bad)
        .output()
        .unwrap();
    std::fs::remove_file(&bad).unwrap();
    assert!(!refused.status.success(), "the schema refuses a bad status");
}

/// `timeline.trace.json` follows the JSON Trace Event Format that
/// chrome://tracing and Perfetto read: an object with `traceEvents`; each
/// event a known phase (`X`, `B`, `E`, `i`, `M`) with a name, an integer
/// pid and tid and, but for metadata, a timestamp in µs; a complete event
/// has a duration; begin and end pair up on their thread; complete events
/// on a thread nest or do not overlap (Perfetto drops those that cross).
/// It shows the phases and every test.
pub(crate) fn check_trace(results: &Path) {
    let text = std::fs::read_to_string(results.join("timeline.trace.json")).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let mut open: std::collections::BTreeMap<(u64, u64), Vec<(String, u64)>> = Default::default();
    let mut spans: std::collections::BTreeMap<(u64, u64), Vec<(u64, u64)>> = Default::default();
    let mut tests = 0;
    let mut phases = BTreeSet::new();
    for e in events {
        let ph = e["ph"].as_str().expect("ph");
        let name = e["name"].as_str().expect("name").to_owned();
        let pid = e["pid"].as_u64().expect("an integer pid");
        let tid = e["tid"].as_u64().expect("an integer tid");
        if ph == "M" {
            assert!(
                matches!(name.as_str(), "process_name" | "thread_name")
                    && e["args"]["name"].is_string(),
                "{e}"
            );
            continue;
        }
        let ts = e["ts"].as_u64().expect("ts in µs");
        match ph {
            "X" => {
                let dur = e["dur"].as_u64().expect("a complete event has a dur");
                spans.entry((pid, tid)).or_default().push((ts, ts + dur));
                match e["cat"].as_str() {
                    Some("test") => tests += 1,
                    Some("phase") => {
                        phases.insert(name);
                    }
                    _ => {}
                }
            }
            "B" => open.entry((pid, tid)).or_default().push((name, ts)),
            "E" => {
                let (began, at) = open
                    .get_mut(&(pid, tid))
                    .and_then(Vec::pop)
                    .unwrap_or_else(|| panic!("an end without a begin: {e}"));
                assert_eq!(began, name, "{e}");
                assert!(ts >= at, "{e}");
            }
            "i" => assert!(matches!(e["s"].as_str(), Some("g" | "p" | "t")), "{e}"),
            other => panic!("phase {other} is not one this trace uses: {e}"),
        }
    }
    assert!(open.values().all(Vec::is_empty), "unended: {open:?}");
    for (thread, mut list) in spans {
        list.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut stack: Vec<(u64, u64)> = Vec::new();
        for (from, to) in list {
            while stack.last().is_some_and(|top| top.1 <= from) {
                stack.pop();
            }
            if let Some(top) = stack.last() {
                assert!(
                    to <= top.1,
                    "crossing slices on {thread:?}: {top:?} and {:?}",
                    (from, to)
                );
            }
            stack.push((from, to));
        }
    }
    assert_eq!(tests, 10, "every test is on the timeline");
    for phase in ["up", "health", "auth", "tests", "residue", "down"] {
        assert!(phases.contains(phase), "{phase} in {phases:?}");
    }
}
