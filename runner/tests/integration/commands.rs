//! The other verbs, and the command line itself.

use crate::{fixture, http, runner, CallerPod, Ran};

#[test]
fn help_documents_the_exit_codes_and_bad_arguments_are_64() {
    for args in [&["--help"][..], &["run", "--help"]] {
        let ran = Ran::from(runner().args(args).output().unwrap());
        assert_eq!(ran.code, 0);
        for code in ["0 ", "1 ", "2 ", "64 ", "130 "] {
            assert!(
                ran.stdout.contains(&format!("  {code}")),
                "{code} in {}",
                ran.stdout
            );
        }
    }
    assert_eq!(
        Ran::from(runner().arg("--version").output().unwrap()).code,
        0
    );
    assert_eq!(Ran::from(runner().args(["run"]).output().unwrap()).code, 64);
    assert_eq!(
        Ran::from(
            runner()
                .args(["run", "/nonexistent/suite"])
                .output()
                .unwrap()
        )
        .code,
        64
    );
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["--partition", "3/2"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 64);
    assert!(ran.stderr.contains("--partition"), "{}", ran.stderr);
}

/// The exit codes a `--help` documents, in the order it lists them: the
/// lines `  N  what` after `Exit codes:`.
fn documented_exit_codes(help: &str) -> Vec<u8> {
    let Some((_, table)) = help.split_once("Exit codes:\n") else {
        return Vec::new();
    };
    table
        .lines()
        .map_while(|line| line.strip_prefix("  "))
        .filter_map(|line| line.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Each verb's `--help` lists the exit codes that verb can end with, and
/// only those; the binary's own lists them all.
#[test]
fn each_verbs_help_lists_the_exit_codes_it_uses() {
    let table: &[(&[&str], &[u8])] = &[
        (&["--help"], &[0, 1, 2, 64, 130]),
        (&["run", "--help"], &[0, 1, 2, 64, 130]),
        (&["janitor", "--help"], &[0, 1, 2, 64]),
        (&["merge", "--help"], &[0, 2, 64]),
        (&["report", "--help"], &[0, 2, 64]),
        (&["new", "--help"], &[0, 2, 64]),
        (&["check", "--help"], &[0, 1, 64]),
        (&["check-known-issues", "--help"], &[0, 1, 64]),
        (&["pod", "--help"], &[0, 1, 2, 64]),
        (&["pod", "up", "--help"], &[0, 1, 2, 64]),
        (&["pod", "status", "--help"], &[0, 1, 2, 64]),
        (&["pod", "ls", "--help"], &[0, 64]),
        (&["pod", "down", "--help"], &[0, 1, 2, 64]),
    ];
    let mut wrong = Vec::new();
    for (args, expected) in table {
        let ran = Ran::from(runner().args(*args).output().unwrap());
        assert_eq!(ran.code, 0, "{args:?}: {}", ran.stderr);
        let documented = documented_exit_codes(&ran.stdout);
        if documented != *expected {
            wrong.push(format!(
                "{args:?} documents {documented:?}, expected {expected:?}:\n{}",
                ran.stdout
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn check_known_issues_fails_on_a_stale_entry() {
    let suite = fixture("suite");
    let ran = Ran::from(
        runner()
            .arg("check-known-issues")
            .arg(suite.path())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0);
    let file = suite.path().join("KNOWN-ISSUES.md");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{text}\n## FIX-OLD: fixed long ago\nNobody pins it.\nhttps://bugs.example.com/FIX-OLD\n")).unwrap();
    let ran = Ran::from(
        runner()
            .arg("check-known-issues")
            .arg(suite.path())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1);
    assert!(
        ran.stdout.contains("stale") && ran.stdout.contains("FIX-OLD"),
        "{}",
        ran.stdout
    );
}

/// `check` of a folder without `testkit.toml` does not call the missing
/// file valid: it says the defaults apply.
#[test]
fn check_of_a_suite_without_its_config_says_the_defaults_apply() {
    let dir = tempfile::tempdir().unwrap();
    let ran = Ran::from(runner().arg("check").arg(dir.path()).output().unwrap());
    assert!(
        ran.stdout
            .contains("testkit.toml: none; the defaults apply"),
        "{}",
        ran.stdout
    );
    assert!(!ran.stdout.contains("valid"), "{}", ran.stdout);
}

/// `check SUITE` says a suite is valid without building it, and names
/// every problem at once: a bad key of `testkit.toml`, a kind whose
/// template is broken, a malformed `KNOWN-ISSUES.md`; nothing is built.
#[test]
fn check_names_every_problem_of_a_suite_without_building_it() {
    let suite = fixture("suite");
    let ran = Ran::from(runner().arg("check").arg(suite.path()).output().unwrap());
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout
            .contains("testkit.toml: valid (resource kinds: `sandbox`)"),
        "{}",
        ran.stdout
    );
    assert!(
        !suite.path().join("target").exists(),
        "check built the suite"
    );

    let config = suite.path().join("testkit.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "exists = \"GET /api/sandboxes/{name}\"",
            "exists = \"GET /api/sandboxes/{name|base65}\"",
        ),
    )
    .unwrap();
    let issues = suite.path().join("KNOWN-ISSUES.md");
    let known = std::fs::read_to_string(&issues).unwrap();
    std::fs::write(&issues, format!("{known}\n## : no id\n")).unwrap();
    let ran = Ran::from(runner().arg("check").arg(suite.path()).output().unwrap());
    assert_eq!(ran.code, 1, "{}{}", ran.stdout, ran.stderr);
    assert!(
        ran.stdout.contains("`|base65` is not a filter")
            && ran.stdout.contains("resources.sandbox"),
        "the kind's problem: {}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("KNOWN-ISSUES.md"),
        "the known issues' problem: {}",
        ran.stdout
    );

    std::fs::write(&config, format!("{text}\n[suite]\nflaky = \"sometimes\"\n")).unwrap();
    let ran = Ran::from(runner().arg("check").arg(suite.path()).output().unwrap());
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    assert!(ran.stdout.contains("testkit.toml"), "{}", ran.stdout);

    let ran = Ran::from(
        runner()
            .args(["check", "/nonexistent/suite"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 64);
    assert!(ran.stderr.contains("is not a directory"), "{}", ran.stderr);
}

/// `check` refuses a `[pod] fields` entry named as testkit names what it
/// writes into the handle: a field `cluster` of a pod of nodes used to be
/// accepted, then failed the boot with "the pod printed an unusable
/// handle". Every reserved name is refused, naming it and the others.
#[test]
fn check_refuses_reserved_pod_fields() {
    let dir = tempfile::tempdir().unwrap();
    for reserved in testkit_engine::template::RESERVED_FIELDS
        .iter()
        .copied()
        .chain(["port_peer"])
    {
        std::fs::write(
            dir.path().join("testkit.toml"),
            format!(
                "[pod]\nready = \"health\"\nfields = {{ token = \"{{random}}\", {reserved} = \"x\" }}\n"
            ),
        )
        .unwrap();
        let ran = Ran::from(runner().arg("check").arg(dir.path()).output().unwrap());
        assert_eq!(ran.code, 1, "{reserved}: {}{}", ran.stdout, ran.stderr);
        assert!(
            ran.stdout.contains("`pod.fields` has")
                && ran.stdout.contains(&format!("{reserved:?}"))
                && ran.stdout.contains("cluster")
                && ran.stdout.contains("rename the field"),
            "{reserved}: {}",
            ran.stdout
        );
    }
}

/// `new DIR` makes a suite that checks clean and runs green at once,
/// against the default pod and, with `--pod-command`, against a service
/// that prints no handle; a folder that is not empty is refused.
#[test]
fn a_new_suite_runs_green_against_the_default_pod_and_a_pod_command() {
    let scratch = tempfile::tempdir().unwrap();
    for (name, args) in [
        ("default", vec![]),
        (
            "own-service",
            vec![
                "--pod-command",
                "sandboxd serve --home {home} --listen {listen}",
                "--health-path",
                "/api/health",
            ],
        ),
    ] {
        let dir = scratch.path().join(name);
        let made = Ran::from(runner().arg("new").arg(&dir).args(&args).output().unwrap());
        assert_eq!(made.code, 0, "{name}: {}{}", made.stdout, made.stderr);
        for file in [
            "Cargo.toml",
            "Cargo.lock",
            "testkit.toml",
            "KNOWN-ISSUES.md",
            ".config/nextest.toml",
            "tests/tests/smoke.rs",
        ] {
            assert!(dir.join(file).is_file(), "{name}: no {file}");
        }
        let checked = Ran::from(runner().arg("check").arg(&dir).output().unwrap());
        assert_eq!(checked.code, 0, "{name}: {}", checked.stdout);
        let ran = Ran::from(runner().arg("run").arg(&dir).output().unwrap());
        assert_eq!(ran.code, 0, "{name}: {}{}", ran.stdout, ran.stderr);
        let records = testkit_engine::report::read_records(&ran.results()).unwrap();
        let passed = records
            .iter()
            .filter(|r| r.outcome == testkit_engine::report::Outcome::Passed)
            .count();
        let expected = if name == "default" { 2 } else { 1 };
        assert_eq!(passed, expected, "{name}: {records:#?}");
        assert_eq!(records.len(), expected, "{name}: {records:#?}");
        let refused = Ran::from(runner().arg("new").arg(&dir).output().unwrap());
        assert_eq!(refused.code, 64, "{name}");
        assert!(
            refused.stderr.contains("is not empty"),
            "{}",
            refused.stderr
        );
    }
}

/// With `TESTKIT_SOURCES=none`, `new` makes a suite that depends on
/// testkit of the runner's own version from the registry and names no path
/// into the checkout; a value that is neither a checkout nor `none` is
/// refused, naming the variable and how to mend it.
#[test]
fn a_new_suite_without_a_checkout_depends_on_testkit_from_the_registry() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("from-registry");
    let made = Ran::from(
        runner()
            .arg("new")
            .arg(&dir)
            .env("TESTKIT_SOURCES", "none")
            .output()
            .unwrap(),
    );
    assert_eq!(made.code, 0, "{}{}", made.stdout, made.stderr);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let dependency = format!("testkit = \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(manifest.contains(&dependency), "{manifest}");
    assert!(!manifest.contains("path ="), "{manifest}");
    assert!(
        !dir.join("Cargo.lock").exists(),
        "a lockfile of the checkout's"
    );
    let checkout = crate::workspace();
    let checkout = checkout.to_string_lossy();
    let mut files = vec![dir.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains(checkout.as_ref()),
                "{} names the checkout: {text}",
                path.display()
            );
        }
    }

    let nowhere = scratch.path().join("nowhere");
    let refused = Ran::from(
        runner()
            .arg("new")
            .arg(scratch.path().join("refused"))
            .env("TESTKIT_SOURCES", &nowhere)
            .output()
            .unwrap(),
    );
    assert_eq!(refused.code, 64, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("TESTKIT_SOURCES=")
            && refused.stderr.contains(nowhere.to_str().unwrap())
            && refused.stderr.contains("`none`"),
        "{}",
        refused.stderr
    );
    // `run` and `pod up` refuse it the same way, before anything starts:
    // whether or not a sandboxd is found elsewhere.
    let results = scratch.path().join("results");
    for args in [
        vec![
            "run".into(),
            dir.clone().into_os_string(),
            "--results".into(),
            results.clone().into_os_string(),
        ],
        vec![
            "pod".into(),
            "up".into(),
            "--suite".into(),
            dir.clone().into_os_string(),
        ],
    ] {
        let refused = Ran::from(
            runner()
                .args(&args)
                .env("TESTKIT_SOURCES", &nowhere)
                .output()
                .unwrap(),
        );
        assert_eq!(refused.code, 64, "{args:?}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("TESTKIT_SOURCES=") && !results.exists(),
            "{args:?}: {}",
            refused.stderr
        );
    }
    // Listing (or stopping) pods never reads it.
    let pods = scratch.path().join("pods");
    let listed = Ran::from(
        runner()
            .args(["pod", "ls"])
            .env("TESTKIT_SOURCES", &nowhere)
            .env("TESTKIT_PODS_DIR", &pods)
            .output()
            .unwrap(),
    );
    assert_eq!(listed.code, 0, "{}", listed.stderr);
}

/// The janitor deletes what carries the run id, and nothing else.
#[test]
fn janitor_deletes_a_runs_leftovers_and_never_other_names() {
    let suite = fixture("suite");
    let pod = CallerPod::start();
    let token = pod.handle["token"].as_str().unwrap();
    let run_id = "janitor1test";
    for name in [
        format!("ct-{run_id}-abcdef-01"),
        format!("ct-{run_id}-abcdef-02"),
        "ct-otherrun-abcdef-01".to_owned(),
    ] {
        let body = serde_json::json!({ "name": name, "labels": {}, "env": {} }).to_string();
        let (status, answer) = http("POST", &pod.url("/api/sandboxes"), Some(token), Some(&body));
        assert_eq!(status, 201, "{answer}");
    }
    // The run's journal names one of its sandboxes, and (a journal tampered
    // with, or of a kind with another prefix) another run's: the janitor's
    // own name check must leave that one alone, whatever the journal says.
    let results = tempfile::tempdir().unwrap();
    let journal_dir = results.path().join("journal");
    std::fs::create_dir_all(&journal_dir).unwrap();
    // Written by a process that has ended, as a dead run's journal is.
    let mut writer = std::process::Command::new("true").spawn().unwrap();
    let writer_pid = writer.id();
    let writer_ticks = testkit_engine::process::start_ticks(writer_pid as i32);
    writer.wait().unwrap();
    let lines: String = [
        format!("ct-{run_id}-abcdef-02"),
        "ct-otherrun-abcdef-01".to_owned(),
    ]
    .iter()
    .map(|name| {
        let mut entry = testkit_engine::resource::JournalEntry::new(
            testkit_engine::resource::Event::Created,
            "sandbox",
            name,
            run_id,
            "tests::made_it",
            None,
        );
        entry.pid = writer_pid;
        entry.start_ticks = writer_ticks;
        format!("{}\n", serde_json::to_string(&entry).unwrap())
    })
    .collect();
    std::fs::write(journal_dir.join("tests-1.jsonl"), lines).unwrap();
    // The session it opens goes with the test, not under the runtime dir.
    let secrets = tempfile::tempdir().unwrap();
    let ran = Ran::from(
        runner()
            .env("TESTKIT_SECRETS_DIR", secrets.path())
            .arg("janitor")
            .arg("--suite")
            .arg(suite.path())
            .arg("--handle-json")
            .arg(&pod.handle_file)
            .args(["--run", run_id])
            .arg("--results")
            .arg(results.path())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 0, "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains("left alone sandbox `ct-otherrun-abcdef-01`: it does not carry the run id"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains(&format!("deleted sandbox `ct-{run_id}-abcdef-01`")),
        "{}",
        ran.stdout
    );
    let (_, body) = pod.get(&format!("/api/sandboxes?prefix=ct-{run_id}-"));
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "{body}");
    let (_, body) = pod.get("/api/sandboxes?prefix=ct-otherrun-");
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        list["items"].as_array().unwrap().len(),
        1,
        "another run's sandbox is left alone: {body}"
    );
}

#[test]
fn merge_of_a_missing_input_is_64() {
    let out = tempfile::tempdir().unwrap();
    let ran = Ran::from(
        runner()
            .arg("merge")
            .arg(out.path())
            .arg("/nonexistent/results")
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 64);
}

#[test]
fn report_of_a_missing_or_foreign_folder_is_64_and_of_one_without_records_2() {
    let ran = Ran::from(
        runner()
            .args(["report", "/nonexistent/results"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 64, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("/nonexistent/results"),
        "{}",
        ran.stderr
    );
    // A folder that is not a results folder is bad input…
    let empty = tempfile::tempdir().unwrap();
    let ran = Ran::from(runner().arg("report").arg(empty.path()).output().unwrap());
    assert_eq!(ran.code, 64, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("neither records/ nor verdict.jsonl"),
        "{}",
        ran.stderr
    );
    assert!(!empty.path().join("junit.xml").exists());
    // …and one whose tests recorded nothing could not be reported on.
    std::fs::create_dir(empty.path().join("records")).unwrap();
    let ran = Ran::from(runner().arg("report").arg(empty.path()).output().unwrap());
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("no test records"), "{}", ran.stderr);
    assert!(!empty.path().join("junit.xml").exists());
}

/// `pod up` of a process pod leaves a handle whose `process` field names
/// the pod's log where it is after the pod's folder got its name: a test
/// against that pod (plain `cargo nextest`, no runner) reads the pod's
/// last lines from it in a hang report. A relative `TESTKIT_PODS_DIR`
/// still gives absolute paths, which a handle must hold.
#[test]
fn pod_up_s_handle_names_the_pod_s_log_where_it_is() {
    let suite = fixture("suite");
    let scratch = tempfile::tempdir().unwrap();
    let pods = scratch.path().join("pods");
    let up = Ran::from(
        runner()
            .current_dir(scratch.path())
            .env("TESTKIT_PODS_DIR", "pods")
            .args(["pod", "up", "--json", "--suite"])
            .arg(suite.path())
            .output()
            .unwrap(),
    );
    assert_eq!(up.code, 0, "{}{}", up.stdout, up.stderr);
    let out: serde_json::Value = serde_json::from_str(up.stdout.trim()).unwrap();
    let name = out["name"].as_str().unwrap().to_owned();
    let down = || {
        runner()
            .env("TESTKIT_PODS_DIR", &pods)
            .args(["pod", "down", &name])
            .output()
            .unwrap()
    };
    let handle: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out["handle"].as_str().unwrap()).unwrap()).unwrap();
    let log = std::path::PathBuf::from(handle["process"]["log"].as_str().unwrap_or_default());
    let found = log.is_file();
    let listed = pods.join(&name);
    let _ = down();
    assert!(
        found && log.starts_with(&listed),
        "the handle's log {} is a file under the pod's folder {}",
        log.display(),
        listed.display()
    );
}

/// A `--health-path` that would make a suite that does not parse (a
/// quote, no leading `/`) is refused, naming it, and nothing is made.
#[test]
fn new_refuses_a_health_path_that_is_not_a_plain_url_path() {
    let scratch = tempfile::tempdir().unwrap();
    for bad in ["health", "/he\"alth", "/a b", "/x\\y", "/#frag"] {
        let dir = scratch.path().join("suite");
        let refused = Ran::from(
            runner()
                .arg("new")
                .arg(&dir)
                .args([
                    "--pod-command",
                    "my-svc --listen {listen}",
                    "--health-path",
                    bad,
                ])
                .output()
                .unwrap(),
        );
        assert_eq!(refused.code, 64, "{bad}: {}", refused.stderr);
        assert!(
            refused.stderr.contains("--health-path") && refused.stderr.contains("/health"),
            "{bad}: {}",
            refused.stderr
        );
        assert!(
            !dir.join("testkit.toml").exists(),
            "{bad}: a suite was made"
        );
    }
}
