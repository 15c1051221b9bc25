//! Residue below the API: a product that forgets (sandboxd's
//! `--fault keep-dirs-on-delete` answers a delete and leaves the sandbox's
//! directory under HOME) passes the sweep, which trusts its listing, and is
//! caught by the fixture suite's witness `home-dirs` (`ls {home}/sandboxes`).

use std::time::Duration;

use crate::{fixture, http, runner, wait_for, CallerPod, Ran};

/// A run of the fixture suite's `create_two` (two sandboxes, deleted by
/// their test's cleanup), its pod started with `serve_args` after `serve`.
fn run_create_two(serve_args: &[&str]) -> Ran {
    let suite = fixture("suite");
    if !serve_args.is_empty() {
        let toml = suite.path().join("testkit.toml");
        let mut text = std::fs::read_to_string(&toml).unwrap();
        let command: Vec<String> = ["sandboxd", "serve"]
            .iter()
            .chain(serve_args)
            .map(|a| format!("{a:?}"))
            .collect();
        text.push_str(&format!("\n[pod]\ncommand = [{}]\n", command.join(", ")));
        std::fs::write(&toml, text).unwrap();
    }
    Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "test(create_two)"])
            .output()
            .unwrap(),
    )
}

/// The product says both sandboxes are gone, and their directories stay:
/// the residue phase fails naming the witness and each directory, the
/// summary lists them as leaks, and the run fails (exit 1).
#[test]
fn a_directory_the_product_forgot_fails_the_residue_phase_naming_the_witness() {
    let ran = run_create_two(&["--fault", "keep-dirs-on-delete"]);
    let run = ran.run_id();
    let (tests, _) = ran.verdict("tests");
    assert_eq!(tests, "pass", "the tests' own cleanup saw both gone");
    let (verdict, evidence) = ran.verdict("residue");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(
        evidence.contains("listing of sandbox by the run id")
            && evidence.contains("nothing left; sandbox directories (witness home-dirs): 2 of the 2 listed carry the run id below the API"),
        "{evidence}"
    );
    let prefix = format!("sandbox directories (witness home-dirs): ct-{run}-");
    let leaks: Vec<&str> = ran.stdout.lines().filter(|l| l.contains(&prefix)).collect();
    assert_eq!(leaks.len(), 2, "the summary names both: {}", ran.stdout);
    assert!(
        leaks
            .iter()
            .all(|l| l.contains("still there below the API")),
        "{leaks:?}"
    );
    assert_eq!(ran.code, 1, "{}", ran.stdout);
}

/// The same run against a pod that deletes what it says it deleted: the
/// witness looked, found nothing of the run, and the residue phase passes.
#[test]
fn the_same_run_without_the_fault_passes_its_witness() {
    let ran = run_create_two(&[]);
    let (verdict, evidence) = ran.verdict("residue");
    assert_eq!(verdict, "pass", "{evidence}");
    assert!(
        evidence.ends_with("nothing left; sandbox directories (witness home-dirs): 0 listed, none carries the run id"),
        "{evidence}"
    );
    assert_eq!(ran.code, 0, "{}", ran.stdout);
}

/// `janitor --run ID` asks the witnesses too: given the pod's HOME it names
/// the directory the product forgot, says it cannot delete it, and fails;
/// without the HOME, the witness says it does not apply and why.
#[test]
fn the_janitor_names_what_a_witness_finds_below_the_api() {
    let pod = CallerPod::start_with(&["--fault", "keep-dirs-on-delete"]);
    let suite = fixture("suite");
    let run = "wjan1";
    let name = format!("ct-{run}-abcdef-01");
    let token = pod.handle["token"].as_str().unwrap().to_owned();
    let body = format!("{{\"name\": \"{name}\"}}");
    let created = http(
        "POST",
        &pod.url("/api/sandboxes"),
        Some(&token),
        Some(&body),
    );
    assert!(created.0 < 300, "{created:?}");
    let path = format!("/api/sandboxes/{name}");
    let deleted = http("DELETE", &pod.url(&path), Some(&token), None);
    assert!(deleted.0 < 300, "{deleted:?}");
    assert!(wait_for(Duration::from_secs(10), || pod.get(&path).0 == 404));
    assert!(pod.home().join("sandboxes").join(&name).is_dir());
    let janitor = |home: Option<&std::path::Path>| {
        let mut cmd = runner();
        cmd.arg("janitor")
            .arg("--suite")
            .arg(suite.path())
            .args(["--run", run, "--handle-json"])
            .arg(&pod.handle_file);
        if let Some(home) = home {
            cmd.arg("--pod-home").arg(home);
        }
        Ran::from(cmd.output().unwrap())
    };
    let ran = janitor(Some(pod.home()));
    assert!(
        ran.stdout.contains(&format!(
            "LEFT BELOW THE API sandbox directories (witness home-dirs): {name}: the janitor \
             cannot delete sandbox directories"
        )),
        "{}",
        ran.stdout
    );
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let ran = janitor(None);
    assert!(
        ran.stdout.contains(
            "witness: sandbox directories (witness home-dirs) does not apply: it uses `{home}`, \
             and the janitor does not know the pod's HOME: pass --pod-home DIR"
        ),
        "{}",
        ran.stdout
    );
    assert_eq!(ran.code, 0, "{}", ran.stdout);
}
