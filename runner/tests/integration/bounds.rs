//! What a run keeps is bounded whatever its tests do: a test that prints
//! 200 MB leaves the runner's memory and the results folder small, its
//! output cut where a marker says how much was dropped.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::truth::{add_test_binary, only};
use crate::{fixture, runner, Ran};

/// Prints about 200 MB to stdout, in four writes of 25 MB without a
/// newline and then as a million lines of 100 bytes, and fails, so that
/// nextest reports its whole output in its event.
const PRINTER: &str = r#"
use std::io::Write;
use testkit::prelude::*;

/// Prints about 200 MB, then fails.
#[testkit::test(timeout = "5m")]
async fn prints_200_mb(_cx: &mut Cx) -> testkit::Result {
    let mut out = std::io::stdout().lock();
    out.write_all(b"PRINTER-HEAD\n")?;
    let block = vec![b'x'; 25 << 20];
    for _ in 0..4 {
        out.write_all(&block)?;
    }
    out.write_all(b"\n")?;
    let line = [b'y'; 99];
    for _ in 0..1_000_000 {
        out.write_all(&line)?;
        out.write_all(b"\n")?;
    }
    out.write_all(b"PRINTER-TAIL\n")?;
    out.flush()?;
    bail!("printed 200 MB on purpose");
}

testkit::main!();
"#;

/// The peak resident set of the process `pid` so far (VmHWM), in KiB.
fn high_water_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn folder_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            folder_bytes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Runs the printer under `engine`: the run, and the runner's peak RSS in
/// KiB, sampled every 50 ms while it runs.
fn run_the_printer(engine: &str) -> (Ran, u64) {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "printer", PRINTER);
    let child = runner()
        .arg("run")
        .arg(suite.path())
        .args(["--runner", engine])
        .args(only("printer", engine))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        while let Some(kib) = high_water_kib(pid) {
            peak = peak.max(kib);
            std::thread::sleep(Duration::from_millis(50));
        }
        peak
    });
    let output = child.wait_with_output().unwrap();
    let peak_kib = sampler.join().unwrap();
    let ran = Ran::from(output);
    eprintln!(
        "{engine}: runner peak RSS: {:.1} MiB",
        peak_kib as f64 / 1024.0
    );
    (ran, peak_kib)
}

/// The bytes the first `… N bytes dropped …` marker in `text` names (a
/// header that describes the marker names no number).
fn dropped(text: &str) -> u64 {
    text.split("… ")
        .skip(1)
        .find_map(|s| s.split(" bytes dropped").next()?.parse().ok())
        .unwrap_or_else(|| panic!("no marker in the kept output"))
}

/// A test printing 200 MB (big writes and many lines) under nextest: the
/// runner's own peak RSS (VmHWM, read while it runs: nextest, which holds
/// the output, is a descendant, so the rusage of waited children would
/// count it) stays under 150 MiB, the results folder under 8 MiB, and the
/// output kept is its head and tail around a marker naming the bytes
/// dropped, once.
#[test]
fn a_test_that_prints_200_mb_leaves_the_runner_and_the_results_small() {
    let (ran, peak_kib) = run_the_printer("nextest");
    assert_eq!(ran.code, 1, "the printer fails on purpose: {}", ran.stdout);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(evidence.contains("0 passed, 1 failed"), "{evidence}");
    assert!(
        peak_kib > 0 && peak_kib < 150 * 1024,
        "the runner's peak RSS was {peak_kib} KiB"
    );

    let results = ran.results();
    let size = folder_bytes(&results);
    assert!(size < 8 << 20, "the results folder holds {size} bytes");

    // The output is kept once, in the failed event, cut around a marker
    // that names what was dropped; tests.log says where it is.
    let events = std::fs::read_to_string(results.join("tests.events.jsonl")).unwrap();
    let failed: serde_json::Value = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "failed")
        .unwrap_or_else(|| panic!("no failed event in {events:.2000}"));
    let stdout = failed["stdout"].as_str().unwrap();
    assert!(stdout.contains("PRINTER-HEAD"), "{stdout:.300}");
    assert!(
        stdout.contains("PRINTER-TAIL"),
        "{:.300}",
        &stdout[stdout.len() - 300..]
    );
    let dropped = dropped(stdout);
    assert!(
        dropped > 190_000_000 && (dropped as usize) + stdout.len() > 200_000_000,
        "dropped {dropped}, kept {}",
        stdout.len()
    );
    let log = std::fs::read_to_string(results.join("tests.log")).unwrap();
    assert!(
        !log.contains("yyyyyyyyyy"),
        "tests.log holds the output too"
    );
    assert!(log.contains("tests.events.jsonl"), "{log:.2000}");
}

/// The same under `cargo test`, where the tests' output goes to
/// `tests.log`: the runner stays small, and `tests.log` keeps its head and
/// tail around the marker.
#[test]
fn a_test_that_prints_200_mb_under_cargo_test_leaves_the_runner_and_the_results_small() {
    let (ran, peak_kib) = run_the_printer("cargo-test");
    assert_eq!(ran.code, 1, "the printer fails on purpose: {}", ran.stdout);
    let (verdict, evidence) = ran.verdict("tests");
    assert!(
        evidence.contains("0 passed, 1 failed"),
        "{verdict}: {evidence}"
    );
    assert!(
        peak_kib > 0 && peak_kib < 150 * 1024,
        "the runner's peak RSS was {peak_kib} KiB"
    );
    let results = ran.results();
    let size = folder_bytes(&results);
    assert!(size < 12 << 20, "the results folder holds {size} bytes");
    let log = std::fs::read_to_string(results.join("tests.log")).unwrap();
    assert!(
        log.contains("PRINTER-HEAD") && log.contains("PRINTER-TAIL"),
        "{log:.2000}"
    );
    assert!(dropped(&log) > 190_000_000, "{log:.300}");
}

/// Two tests, each holding one sandbox of a budget of two and then wanting
/// two more: after a barrier both hold one, and each waits for the other.
const DEADLOCK: &str = r#"
use std::time::{Duration, Instant};
use testkit::prelude::*;

async fn post(cx: &Cx, name: &str) -> testkit::Result {
    let pod = cx.pod()?;
    let response = pod
        .client()
        .post(pod.url("/api/sandboxes"))
        .json(&serde_json::json!({ "name": name }))
        .send()
        .await?;
    ensure!(response.status().is_success(), "creating {name} answered {}", response.status());
    Ok(())
}

/// Returns once both tests hold their first sandbox: each marks the
/// folder `DEADLOCK_BARRIER`.
async fn barrier(me: &str) -> testkit::Result {
    let dir = std::path::PathBuf::from(std::env::var("DEADLOCK_BARRIER")?);
    std::fs::write(dir.join(me), b"")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&dir)?.count() < 2 {
        ensure!(Instant::now() < deadline, "the other test never held its sandbox");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

async fn greedy(cx: &mut Cx, me: &str) -> testkit::Result {
    let first = cx.unique_name();
    cx.create("sandbox", &first, post(cx, &first)).await?;
    barrier(me).await?;
    for _ in 0..2 {
        let name = cx.unique_name();
        cx.create("sandbox", &name, post(cx, &name)).await?;
    }
    Ok(())
}

/// One side of the deadlock. (Its timeout only keeps a deadlock that is
/// never broken from hanging the run.)
#[testkit::test(timeout = "30s")]
async fn left(cx: &mut Cx) -> testkit::Result {
    greedy(cx, "left").await
}

/// The other side.
#[testkit::test(timeout = "30s")]
async fn right(cx: &mut Cx) -> testkit::Result {
    greedy(cx, "right").await
}

testkit::main!();
"#;

/// A real deadlock between two test processes under nextest (each holds a
/// slot of a budget of two and waits for more): each says, while it
/// waits, which kind it waits for and who holds the slots; each fails
/// within its bound (`TESTKIT_BUDGET_WAIT=3s`: no slot freed for 3 s),
/// long before nextest's slow-test kill, with an error naming the kind,
/// the budget, the holders and the mend; the run is a failure (exit 1),
/// not a crash, and nothing leaks.
#[test]
fn a_budget_deadlock_between_two_test_processes_fails_both_naming_the_holders() {
    use testkit_engine::report::{read_records, CleanupState, Outcome};

    let suite = fixture("suite");
    add_test_binary(suite.path(), "deadlock", DEADLOCK);
    let config = suite.path().join("testkit.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    // The budget goes into [resources.sandbox], whose last key this is.
    let last_key = "delete_timeout = \"10s\"\n";
    assert_eq!(text.matches(last_key).count(), 1, "{text}");
    let text = text.replace(last_key, &format!("{last_key}budget = 2\n"));
    std::fs::write(&config, text).unwrap();
    let barrier = tempfile::tempdir().unwrap();

    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(deadlock)", "--", "-j", "2"])
            .env("TESTKIT_BUDGET_WAIT", "3s")
            .env("DEADLOCK_BARRIER", barrier.path())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "a failed run, not a crash: {}", ran.stdout);
    let (verdict, evidence) = ran.verdict("tests");
    assert_eq!(verdict, "fail", "{evidence}");
    assert!(evidence.contains("0 passed, 2 failed"), "{evidence}");
    let (verdict, evidence) = ran.verdict("residue");
    assert_eq!(verdict, "pass", "{evidence}");
    assert!(ran.stdout.contains("leaks: none"), "{}", ran.stdout);

    let records = read_records(&ran.results()).unwrap();
    let sides: Vec<_> = records.iter().filter(|r| r.binary == "deadlock").collect();
    assert_eq!(sides.len(), 2, "{sides:#?}");
    let mut named_both = false;
    for r in &sides {
        let message = r.message.as_deref().unwrap_or_default();
        assert_eq!(r.outcome, Outcome::Failed, "{r:#?}");
        for part in [
            "no `sandbox` slot was freed in 3s (TESTKIT_BUDGET_WAIT",
            "the budget of `sandbox` is 2 and all 2 are held: by `deadlock::",
            "raise `budget` in [resources.sandbox] of testkit.toml",
            "create fewer `sandbox` at once",
        ] {
            assert!(
                message.contains(part),
                "{part:?} not in {}: {message}",
                r.name
            );
        }
        assert!(!message.contains("shutting down"), "{message}");
        named_both |=
            message.contains("by `deadlock::left`") && message.contains("by `deadlock::right`");
        assert!(
            r.output
                .contains("waiting for a `sandbox` slot (budget 2, all held: by `deadlock::"),
            "{}: {}",
            r.name,
            r.output
        );
        // It waited one bound, or two when the other side's slot came
        // free and it then waited for its third; never nextest's 2-minute
        // kill (whose records say "shutting down", checked above). A
        // bound of the behaviour, the build not included.
        assert!(
            r.duration_ms < 20_000,
            "{} took {} ms",
            r.name,
            r.duration_ms
        );
        assert_eq!(r.cleanup, CleanupState::Verified, "{r:#?}");
    }
    assert!(named_both, "no message names both sides: {sides:#?}");
}
