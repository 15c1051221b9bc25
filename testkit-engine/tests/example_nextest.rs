//! The cluster example's nextest settings hold when its fault tests queue:
//! nextest times a test process from its start, the wait for the pod lock
//! included, so `exclusive` tests that queued on the lock were killed in
//! the middle of their fault. The example queues them in nextest instead
//! (a test group of one thread), and gives each longer than its own
//! timeout. Read off the example's files, so that a fault test added with
//! a longer timeout, or a profile without the group, fails here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The harness's timeout of a test that sets none (`TESTKIT_TIMEOUT`'s
/// default).
const DEFAULT_TEST_TIMEOUT: Duration = testkit_engine::settings::DEFAULT_TIMEOUT;

/// What a test needs beyond its own timeout before nextest may kill it: a
/// wait for the shared tests that hold the pod lock, and its cleanup.
const ROOM: Duration = Duration::from_secs(60);

fn suite() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../suites/cluster")
}

/// Each test binary's `exclusive` tests' timeouts, by binary name.
fn exclusive_timeouts() -> BTreeMap<String, Vec<Duration>> {
    let dir = suite().join("tests/tests");
    let mut binaries = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let timeouts: Vec<Duration> = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("#[testkit::test("))
            .filter(|args| args.split([',', ')']).any(|a| a.trim() == "exclusive"))
            .map(|args| {
                args.split("timeout = \"")
                    .nth(1)
                    .and_then(|rest| rest.split('"').next())
                    .map_or(DEFAULT_TEST_TIMEOUT, |t| {
                        humantime::parse_duration(t).unwrap()
                    })
            })
            .collect();
        if !timeouts.is_empty() {
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            binaries.insert(name, timeouts);
        }
    }
    binaries
}

/// How long nextest lets a test run, of a `slow-timeout` table.
fn terminate(slow: &toml::Value) -> Duration {
    let period = humantime::parse_duration(slow["period"].as_str().unwrap()).unwrap();
    let after = slow
        .get("terminate-after")
        .and_then(toml::Value::as_integer)
        .unwrap_or(0);
    assert!(after > 0, "slow-timeout {slow} never terminates");
    period * u32::try_from(after).unwrap()
}

#[test]
fn the_cluster_example_queues_its_fault_tests_in_nextest_and_outlasts_their_timeouts() {
    let config: toml::Table = std::fs::read_to_string(suite().join(".config/nextest.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let binaries = exclusive_timeouts();
    assert!(
        !binaries.is_empty(),
        "the cluster example has no exclusive test"
    );
    for profile in ["default", "ci"] {
        let overrides = config["profile"][profile]
            .get("overrides")
            .and_then(toml::Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (binary, timeouts) in &binaries {
            let filter = format!("binary({binary})");
            let over = overrides
                .iter()
                .find(|o| o.get("filter").and_then(toml::Value::as_str) == Some(&filter))
                .unwrap_or_else(|| {
                    panic!(
                        "profile {profile}: no override for {filter}, whose tests are \
                         exclusive: they queue on the pod lock, and nextest counts the wait"
                    )
                });
            let group = over["test-group"].as_str().unwrap();
            let threads = config["test-groups"][group]["max-threads"].as_integer();
            assert_eq!(
                threads,
                Some(1),
                "profile {profile}: test group {group} runs more than one test at once"
            );
            let slow = over
                .get("slow-timeout")
                .unwrap_or(&config["profile"][profile]["slow-timeout"]);
            let longest = timeouts.iter().max().unwrap();
            assert!(
                terminate(slow) >= *longest + ROOM,
                "profile {profile}: nextest kills a test of {binary} after {:?}, but one \
                 has a timeout of {longest:?}",
                terminate(slow)
            );
        }
    }
}
