//! CI that fans out: the example workflows in `ci-examples/` are valid
//! YAML whose commands are the ones below, and the commands, run here as
//! one CI would on several machines, give the counts of a whole run.

use std::path::{Path, PathBuf};

use crate::report::{count, render};
use crate::{junit_counts, runner, workspace, Ran};

/// How many machines the examples fan out to.
const N: usize = 3;

/// The build job's archive of the suite.
const ARCHIVE: &str = "cargo nextest archive --manifest-path suites/conformance/Cargo.toml \
                       --workspace --archive-file conformance.tar.zst";
/// Partition job `{k}` of `{n}`, each against a pod of its own.
const PARTITION: &str = "testkit-runner run suites/conformance --archive-file conformance.tar.zst \
                         --partition {k}/{n} --results results/{k}";
/// The merge job, over every partition's results folder.
const MERGE: &str = "testkit-runner merge merged results/*";

/// A template's argv for partition `k`, run from `cwd`: the suite is this
/// checkout's, `results/*` is every folder under `cwd/results`.
fn argv(template: &str, k: usize, cwd: &Path) -> Vec<String> {
    let line = template
        .replace("{k}", &k.to_string())
        .replace("{n}", &N.to_string());
    let mut args = Vec::new();
    for word in line.split_whitespace() {
        if let Some(rest) = word.strip_prefix("suites/") {
            args.push(workspace().join("suites").join(rest).display().to_string());
        } else if let Some(dir) = word.strip_suffix("/*") {
            let mut dirs: Vec<PathBuf> = std::fs::read_dir(cwd.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            dirs.sort();
            args.extend(dirs.iter().map(|d| d.display().to_string()));
        } else {
            args.push(word.to_owned());
        }
    }
    args
}

/// Runs a template's command as CI would, in `cwd`.
fn ci_step(template: &str, k: usize, cwd: &Path) -> Ran {
    let args = argv(template, k, cwd);
    let mut cmd = match args[0].as_str() {
        "cargo" => crate::fixture_cargo(),
        "testkit-runner" => runner(),
        other => panic!("a CI step runs {other}"),
    };
    Ran::from(cmd.args(&args[1..]).current_dir(cwd).output().unwrap())
}

/// Three partitions of the conformance suite from one archive, as three
/// processes each with its own pod, merged: the merged counts are a whole
/// run's, and the merged report has every test on one timeline with three
/// pods. The whole run's report, in Chromium, shows every test too.
#[test]
fn three_partitions_on_their_own_pods_merge_into_the_whole_run() {
    let ci = tempfile::tempdir().unwrap();
    let cwd = ci.path();
    let archive = ci_step(ARCHIVE, 0, cwd);
    assert_eq!(archive.code, 0, "{}", archive.stderr);

    // The main job, for comparison: the same archive, every test.
    let whole = Ran::from(
        runner()
            .arg("run")
            .arg(workspace().join("suites/conformance"))
            .args([
                "--archive-file",
                "conformance.tar.zst",
                "--results",
                "whole",
            ])
            .current_dir(cwd)
            .output()
            .unwrap(),
    );
    assert_eq!(whole.code, 0);
    let whole_records = testkit_engine::report::read_records(&cwd.join("whole")).unwrap();
    assert!(whole_records.len() >= 70, "{}", whole_records.len());

    let mut pods = Vec::new();
    for k in 1..=N {
        let ran = ci_step(PARTITION, k, cwd);
        assert_eq!(ran.code, 0, "partition {k}");
        let (_, up) = ran.verdict("up");
        assert!(up.starts_with("started pod "), "{up}");
        pods.push(up);
        let (tests, ..) = junit_counts(&cwd.join(format!("results/{k}/junit.xml")));
        assert!(tests > 0, "partition {k} ran no test");
    }
    pods.sort();
    pods.dedup();
    assert_eq!(pods.len(), N, "each partition had a pod of its own");

    let merged = ci_step(MERGE, 0, cwd);
    assert_eq!(merged.code, 0);
    let out = cwd.join("merged");
    assert_eq!(
        junit_counts(&out.join("junit.xml")),
        junit_counts(&cwd.join("whole/junit.xml")),
        "the merged counts are the whole run's"
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(
        summary.contains(&format!("| {} | 0 | 0 | 0 | 0 |", whole_records.len())),
        "{summary}"
    );
    let last: Vec<&str> = merged.stdout.lines().rev().take(2).collect();
    // As the job named them: a CI log ends with where to look.
    assert_eq!(
        last,
        ["report: merged/report.html", "junit: merged/junit.xml"]
    );

    let n = whole_records.len();
    let dom = render(&out.join("report.html"), "fanout", "merged");
    assert!(dom.contains(">PASSED</span>"), "merged verdict");
    assert_eq!(
        count(&dom, "class=\"pod-head\""),
        N,
        "one timeline, three pods"
    );
    assert_eq!(count(&dom, "class=\"bar passed\""), n);
    assert_eq!(count(&dom, "<tr data-outcome=\"passed\""), n);
    // Each pod's boot and teardown, on the timeline.
    assert_eq!(count(&dom, "data-phase=\"up\" data-pod="), N);
    assert_eq!(count(&dom, "data-phase=\"down\" data-pod="), N);

    let dom = render(&cwd.join("whole/report.html"), "fanout", "whole");
    assert_eq!(count(&dom, "<tr data-outcome=\"passed\""), n);
    assert_eq!(count(&dom, "class=\"bar passed\""), n);
    for r in &whole_records {
        assert!(
            dom.contains(&format!("data-test=\"{}\"", r.name)),
            "{} is not on the page",
            r.name
        );
    }
}

/// A workflow's commands that the fan-out test runs: every line that
/// starts with `testkit-runner` or `cargo nextest archive`, the CI's
/// partition variables written as `{k}` and `{n}`.
fn fanout_commands(lines: &[String]) -> Vec<String> {
    let mut commands: Vec<String> = lines
        .iter()
        .flat_map(|l| l.lines())
        .map(|l| {
            l.trim()
                .replace("${{ matrix.partition }}", "{k}")
                .replace("${{ strategy.job-total }}", "{n}")
                .replace("$CI_NODE_INDEX", "{k}")
                .replace("$CI_NODE_TOTAL", "{n}")
        })
        .filter(|l| l.starts_with("testkit-runner ") || l.starts_with("cargo nextest archive"))
        // The machine matrix's runs: checked by `machine_runs`.
        .filter(|l| !l.contains("--pod vm"))
        .collect();
    commands.sort();
    commands
}

/// The machine matrix's run commands among `lines` (one per job of the
/// matrix, continuation lines joined): each names the matrix's suite,
/// environment and installer, in words `testkit-runner run` takes.
fn machine_runs(lines: &[String], suite: &str, environment: &str, installer: &str) {
    let joined: Vec<String> = lines
        .iter()
        // One word per GitHub expression: `${{matrix.suite}}`.
        .map(|l| {
            l.replace("\\\n", " ")
                .replace("${{ ", "${{")
                .replace(" }}", "}}")
        })
        .filter(|l| l.contains("--pod vm"))
        .collect();
    assert_eq!(joined.len(), 1, "one machine run: {joined:?}");
    let words: Vec<&str> = joined[0].split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| *w == "testkit-runner")
        .expect("the machine job runs testkit-runner");
    let after = |flag: &str| {
        words
            .iter()
            .position(|w| *w == flag)
            .map(|i| words[i + 1])
            .unwrap_or_else(|| panic!("{flag} in {joined:?}"))
    };
    assert_eq!(words[at + 1], "run");
    assert_eq!(words[at + 2], suite);
    assert_eq!(after("--environment"), environment);
    assert_eq!(after("--installer"), installer);
}

fn the_fanout_commands() -> Vec<String> {
    let mut want: Vec<String> = [ARCHIVE, PARTITION, MERGE]
        .iter()
        .map(|c| c.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    want.sort();
    want
}

fn yaml(path: &str) -> serde_norway::Value {
    let path = workspace().join(path);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn strings(v: &serde_norway::Value) -> Vec<String> {
    match v {
        serde_norway::Value::String(s) => vec![s.clone()],
        serde_norway::Value::Sequence(items) => items.iter().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

/// GitHub Actions: three partition jobs of one matrix, each step's `run`.
#[test]
fn the_github_example_is_yaml_running_the_fanout_commands() {
    let doc = yaml("ci-examples/github/e2e.yml");
    let jobs = doc["jobs"].as_mapping().expect("jobs");
    let partitions = doc["jobs"]["partition"]["strategy"]["matrix"]["partition"]
        .as_sequence()
        .expect("a partition matrix");
    assert_eq!(partitions.len(), N);
    let needs = strings(&doc["jobs"]["merge"]["needs"]);
    for job in ["partition", "machine"] {
        assert!(
            needs.contains(&job.to_owned()),
            "the merge waits for {job}: {needs:?}"
        );
    }
    // Environments × installers × suites, as the partitions fan out.
    let matrix = &doc["jobs"]["machine"]["strategy"]["matrix"];
    let installers = strings(&matrix["installer"]);
    assert_eq!(installers, ["deb", "binaries"]);
    assert!(!strings(&matrix["environment"]).is_empty());
    assert!(!strings(&matrix["suite"]).is_empty());
    // A failed partition is what the merged report is for: the other
    // partitions still run, each uploads its results, and the merge runs.
    assert_eq!(
        doc["jobs"]["partition"]["strategy"]["fail-fast"].as_bool(),
        Some(false),
        "a failed partition cancels the others"
    );
    assert_eq!(
        doc["jobs"]["merge"]["if"].as_str(),
        Some("always()"),
        "the merge is skipped after a failed partition"
    );
    for job in ["partition", "merge"] {
        let uploads: Vec<&serde_norway::Value> = doc["jobs"][job]["steps"]
            .as_sequence()
            .expect("steps")
            .iter()
            .filter(|s| {
                s["uses"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("actions/upload-artifact"))
            })
            .collect();
        assert!(!uploads.is_empty(), "{job} uploads nothing");
        for u in uploads {
            assert_eq!(
                u["if"].as_str(),
                Some("always()"),
                "{job}: its results are not uploaded when it fails"
            );
        }
    }
    let runs: Vec<String> = jobs
        .values()
        .filter_map(|job| job["steps"].as_sequence())
        .flatten()
        .flat_map(|step| strings(&step["run"]))
        .collect();
    assert_eq!(fanout_commands(&runs), the_fanout_commands());
    machine_runs(
        &runs,
        "${{matrix.suite}}",
        "${{matrix.environment}}",
        "${{matrix.installer}}",
    );
}

/// GitLab CI: a `parallel` partition job, each job's `script`.
#[test]
fn the_gitlab_example_is_yaml_running_the_fanout_commands() {
    let doc = yaml("ci-examples/gitlab/.gitlab-ci.yml");
    assert_eq!(doc["partition"]["parallel"].as_u64(), Some(N as u64));
    let needs = strings(&doc["merge"]["needs"]);
    assert!(needs.contains(&"partition".to_owned()), "{needs:?}");
    assert!(needs.contains(&"machine".to_owned()), "{needs:?}");
    let matrix = &doc["machine"]["parallel"]["matrix"][0];
    assert_eq!(strings(&matrix["INSTALLER"]), ["deb", "binaries"]);
    assert!(!strings(&matrix["ENVIRONMENT"]).is_empty());
    // After a failed partition: its results are kept, and the merge runs.
    assert_eq!(
        doc["merge"]["when"].as_str(),
        Some("always"),
        "the merge is skipped after a failed partition"
    );
    for job in ["partition", "merge"] {
        assert_eq!(
            doc[job]["artifacts"]["when"].as_str(),
            Some("always"),
            "{job}: its results are not kept when it fails"
        );
    }
    let scripts: Vec<String> = doc
        .as_mapping()
        .expect("a mapping of jobs")
        .values()
        .flat_map(|job| strings(&job["script"]))
        .collect();
    assert_eq!(fanout_commands(&scripts), the_fanout_commands());
    machine_runs(&scripts, "$SUITE", "$ENVIRONMENT", "$INSTALLER");
}
