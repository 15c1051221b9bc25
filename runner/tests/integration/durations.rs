//! Durations that overflow the clock or that cannot be meant, and config
//! values of the wrong type: refused before anything starts, naming the key
//! or the variable, the bound and the fix, with the exit code of bad
//! arguments (64), never a panic (101) halfway through a run.

use crate::{fixture, runner, Ran};

/// The reason and the fix that follow a duration out of the bounds of a
/// timeout.
fn out_of_timeout_bounds(reason: &str) -> String {
    format!("{reason}; give a duration from 1ms to 24h, such as 30s or 5m")
}

fn refused(ran: &Ran, what: &str) {
    assert_eq!(ran.code, 64, "{what}: {}\n{}", ran.stdout, ran.stderr);
    assert!(
        !ran.stderr.contains("panicked") && !ran.stdout.contains("panicked"),
        "{what}: {}",
        ran.stderr
    );
}

/// `check SUITE_DIR` reports the same problem: exit 1, the message on
/// stdout.
fn checked_names(suite: &std::path::Path, expected: &str) {
    let ran = Ran::from(runner().arg("check").arg(suite).output().unwrap());
    assert_eq!(ran.code, 1, "check: {}", ran.stdout);
    assert!(
        ran.stdout.contains(expected),
        "check: {expected}\n{}",
        ran.stdout
    );
}

/// Replaces the line of `key` in the fixture's `[resources.sandbox]`, or
/// adds it.
fn set_sandbox_key(suite: &std::path::Path, key: &str, value: &str) {
    let config = suite.join("testkit.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with(&format!("{key} =")))
        .map(str::to_owned)
        .collect();
    let at = lines
        .iter()
        .position(|l| l == "[resources.sandbox]")
        .expect("the fixture has a sandbox kind");
    lines.insert(at + 1, format!("{key} = {value}"));
    std::fs::write(&config, lines.join("\n") + "\n").unwrap();
}

/// A kind's `delete_timeout` of 5000000000000000h was accepted, and the
/// first delete's deadline overflowed the clock: "overflow when adding
/// duration to instant", exit 101, no residue or down verdict. Zero cannot
/// be meant either. Both are refused by `run` and by `janitor`.
#[test]
fn a_delete_timeout_that_would_overflow_or_is_zero_is_refused_naming_the_key() {
    for (value, reason) in [
        ("5000000000000000h", "it is longer than 24h"),
        ("0s", "it is zero"),
    ] {
        let suite = fixture("suite");
        set_sandbox_key(suite.path(), "delete_timeout", &format!("{value:?}"));
        let expected = format!(
            "invalid {}: `resources.sandbox.delete_timeout` is {value:?}: {}",
            suite.path().join("testkit.toml").display(),
            out_of_timeout_bounds(reason)
        );
        let ran = Ran::from(
            runner()
                .arg("run")
                .arg(suite.path())
                .args(["-E", "binary(sandboxes)"])
                .output()
                .unwrap(),
        );
        refused(&ran, value);
        assert!(ran.stderr.contains(&expected), "{expected}\n{}", ran.stderr);
        let janitor = Ran::from(
            runner()
                .args(["janitor", "--run", "abc123", "--suite"])
                .arg(suite.path())
                .output()
                .unwrap(),
        );
        refused(&janitor, value);
        assert!(
            janitor.stderr.contains(&expected),
            "{expected}\n{}",
            janitor.stderr
        );
        checked_names(suite.path(), &expected);
    }
}

/// `TESTKIT_TIMEOUT=0s` was accepted: every test would time out at once.
/// Past a day, a timeout, a grace or a deadline could overflow the clock.
/// Each is refused before anything starts, naming the variable.
#[test]
fn a_duration_in_the_environment_that_would_overflow_or_is_zero_is_refused_naming_it() {
    let suite = fixture("suite");
    let mut cases = Vec::new();
    for var in [
        "TESTKIT_TIMEOUT",
        "TESTKIT_GRACE",
        "TESTKIT_BROWSER_TEARDOWN",
    ] {
        cases.push((var, "0s", out_of_timeout_bounds("it is zero")));
        cases.push((
            var,
            "5000000000000000h",
            out_of_timeout_bounds("it is longer than 24h"),
        ));
    }
    let sweep = "; give a duration from 1s to 24h, such as 30s or 5m";
    cases.push((
        "TESTKIT_SWEEP_DEADLINE",
        "5000000000000000h",
        format!("it is longer than 24h{sweep}"),
    ));
    cases.push(("TESTKIT_SWEEP_DEADLINE", "0s", format!("it is zero{sweep}")));
    for (var, value, why) in cases {
        let ran = Ran::from(
            runner()
                .arg("run")
                .arg(suite.path())
                .env(var, value)
                .output()
                .unwrap(),
        );
        refused(&ran, &format!("{var}={value}"));
        let expected = format!("{var}={value:?} is invalid: {why}");
        assert!(ran.stderr.contains(&expected), "{expected}\n{}", ran.stderr);
    }
}

/// A runner argument that bounds a wait or an age is bounded too.
#[test]
fn duration_arguments_are_bounded() {
    let ran = Ran::from(
        runner()
            .args(["janitor", "--older-than", "5000000000000000h"])
            .output()
            .unwrap(),
    );
    refused(&ran, "--older-than");
    assert!(
        ran.stderr.contains(
            "\"5000000000000000h\" is invalid: it is longer than 365d; give a duration from 0s to 365d"
        ),
        "{}",
        ran.stderr
    );
    for grace in ["0s", "5000000000000000h"] {
        let ran = Ran::from(
            runner()
                .args(["pod", "down", "no-such-pod", "--grace", grace])
                .output()
                .unwrap(),
        );
        refused(&ran, "--grace");
        assert!(
            ran.stderr.contains("give a duration from 1ms to 24h"),
            "{}",
            ran.stderr
        );
    }
}

/// `budget = "many"` said "`resources.sandbox` invalid type: string "many",
/// expected usize": the kind, not the key. Through the runner, the key is
/// named.
#[test]
fn a_kind_key_of_the_wrong_type_is_named() {
    let suite = fixture("suite");
    set_sandbox_key(suite.path(), "budget", "\"many\"");
    let ran = Ran::from(runner().arg("run").arg(suite.path()).output().unwrap());
    refused(&ran, "budget");
    let expected = format!(
        "invalid {}: `resources.sandbox.budget` has the wrong type: string \"many\", expected usize",
        suite.path().join("testkit.toml").display()
    );
    assert!(ran.stderr.contains(&expected), "{expected}\n{}", ran.stderr);
    checked_names(suite.path(), &expected);
}
