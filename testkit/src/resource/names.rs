//! Resource names: `<prefix>-<run id>-<test tag>-<nn>`, unique across the tests
//! and processes of a run, stable for a test, and a valid DNS label.

/// The longest DNS label, and a common limit on resource names.
pub(crate) const MAX_NAME_LEN: usize = 63;

/// Length of a test tag.
const TAG_LEN: usize = 6;

/// A short stable tag of a test's full name: 6 characters of `a-z0-9`.
pub(crate) fn test_tag(full_name: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut hash: u64 = 0xcbf29ce484222325;
    for &b in full_name.as_bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x100000001b3);
    }
    (0..TAG_LEN)
        .map(|_| {
            let c = ALPHABET[(hash % 36) as usize] as char;
            hash /= 36;
            c
        })
        .collect()
}

/// The tag of this attempt of a test: a nextest retry (`NEXTEST_ATTEMPT` 2
/// and up) gets names of its own, so that what a failed attempt leaked can
/// never collide with what the retry creates.
pub(crate) fn attempt_tag(full_name: &str, attempt: Option<u32>) -> String {
    match attempt {
        Some(attempt) if attempt > 1 => test_tag(&format!("{full_name}#{attempt}")),
        _ => test_tag(full_name),
    }
}

/// The `n`th name of a test (`n` from 1): two digits, more when needed.
pub(crate) fn name(prefix: &str, run_id: &str, tag: &str, n: u32) -> String {
    format!("{prefix}-{run_id}-{tag}-{n:02}")
}

/// Whether `name` is one the run `run_id` may own: `<prefix>-<run id>-…`, and
/// a DNS label. Sweeps, reapers and the janitor delete nothing else.
pub fn carries_run_id(name: &str, prefix: &str, run_id: &str) -> bool {
    !prefix.is_empty()
        && !run_id.is_empty()
        && name.len() > prefix.len() + run_id.len() + 2
        && name
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix('-'))
            .and_then(|r| r.strip_prefix(run_id))
            .is_some_and(|r| r.starts_with('-'))
        && is_dns_label(name)
}

/// RFC 1123 label: 1 to 63 of `a-z0-9-`, not starting or ending with `-`.
pub(crate) fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_distinct_and_dns_labels() {
        let a = test_tag("suite::a");
        assert_eq!(a, test_tag("suite::a"));
        assert_ne!(a, test_tag("suite::b"));
        assert_eq!(a.len(), TAG_LEN);
        let n = name("ct", "abcdefghij", &a, 7);
        assert!(n.ends_with("-07") && is_dns_label(&n), "{n}");
        assert!(name("ct", "abcdefghij", &a, 123).ends_with("-123"));
        // The longest possible: an 8-character prefix and a 16-character run id.
        let long = name("abcdefgh", &"r".repeat(16), &a, 99_999);
        assert!(long.len() <= MAX_NAME_LEN && is_dns_label(&long), "{long}");
    }

    #[test]
    fn a_retry_gets_names_of_its_own() {
        let first = attempt_tag("suite::a", None);
        assert_eq!(first, attempt_tag("suite::a", Some(1)));
        assert_ne!(first, attempt_tag("suite::a", Some(2)));
        assert_ne!(
            attempt_tag("suite::a", Some(2)),
            attempt_tag("suite::a", Some(3))
        );
        assert_eq!(attempt_tag("suite::a", Some(2)).len(), TAG_LEN);
    }

    #[test]
    fn only_names_of_the_run_carry_its_id() {
        assert!(carries_run_id("ct-run1-abcdef-01", "ct", "run1"));
        assert!(!carries_run_id("ct-run12-abcdef-01", "ct", "run1"));
        assert!(!carries_run_id("ct-run1", "ct", "run1"));
        assert!(!carries_run_id("ct-run1-", "ct", "run1"));
        assert!(!carries_run_id("xx-run1-abcdef-01", "ct", "run1"));
        assert!(!carries_run_id("production-db", "ct", "run1"));
        assert!(!carries_run_id("ct-run1-ABC", "ct", "run1"));
        assert!(!carries_run_id("ct-run1-abc", "", "run1"));
        assert!(!carries_run_id("ct--abc", "ct", ""));
    }
}
