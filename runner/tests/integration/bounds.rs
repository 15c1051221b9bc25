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

/// A test printing 200 MB (big writes and many lines) under nextest: the
/// runner's own peak RSS (VmHWM, read while it runs: nextest, which holds
/// the output, is a descendant, so the rusage of waited children would
/// count it) stays under 150 MiB, the results folder under 8 MiB, and the
/// output kept is its head and tail around a marker naming the bytes
/// dropped, once.
#[test]
fn a_test_that_prints_200_mb_leaves_the_runner_and_the_results_small() {
    let suite = fixture("suite");
    add_test_binary(suite.path(), "printer", PRINTER);
    let child = runner()
        .arg("run")
        .arg(suite.path())
        .args(only("printer", "nextest"))
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
    eprintln!("runner peak RSS: {:.1} MiB", peak_kib as f64 / 1024.0);

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
    let marker = stdout
        .split("… ")
        .nth(1)
        .and_then(|s| s.split(" bytes dropped").next())
        .unwrap_or_else(|| panic!("no marker in the kept output"));
    let dropped: u64 = marker.parse().unwrap();
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
