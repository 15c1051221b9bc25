//! Resource names: `<prefix>-<run id>-<test tag>-<nn>`, unique across the tests
//! and processes of a run, stable for a test, and a valid DNS label.

/// The longest DNS label, and a common limit on resource names.
pub(super) const MAX_NAME_LEN: usize = 63;

/// Length of a test tag.
const TAG_LEN: usize = 6;

/// A short stable tag of a test's full name: 6 characters of `a-z0-9`.
pub(super) fn test_tag(full_name: &str) -> String {
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
pub fn attempt_tag(full_name: &str, attempt: Option<u32>) -> String {
    match attempt {
        Some(attempt) if attempt > 1 => test_tag(&format!("{full_name}#{attempt}")),
        _ => test_tag(full_name),
    }
}

/// The `n`th name of a test (`n` from 1): two digits, more when needed.
pub fn name(prefix: &str, run_id: &str, tag: &str, n: u32) -> String {
    Naming::default().name(prefix, run_id, tag, n)
}

/// Whether `name` is one the run `run_id` may own: `<prefix>-<run id>-…`, and
/// a DNS label. Sweeps, reapers and the janitor delete nothing else.
pub fn carries_run_id(name: &str, prefix: &str, run_id: &str) -> bool {
    Naming::default().carries_run_id(name, prefix, run_id)
}

/// How a kind's names look: lowercase letters and digits joined by a
/// separator, at most `max_len` long. The default is a DNS label
/// (`-`, 63); a service whose names must match `^\w+$` says `_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Naming {
    separator: char,
    max_len: usize,
}

impl Default for Naming {
    fn default() -> Naming {
        Naming {
            separator: '-',
            max_len: MAX_NAME_LEN,
        }
    }
}

/// The longest name a test makes: an 8-character prefix, a 16-character run
/// id, a tag, a 5-digit counter and their separators.
pub(super) const LONGEST_NAME: usize = 8 + 1 + 16 + 1 + TAG_LEN + 1 + 5;

/// A `names` table of a resource kind that cannot name the run's resources.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NamingError {
    /// Not a separator names may use.
    #[error("separator {0:?} is not one of \"-\", \"_\" or \".\"")]
    Separator(char),
    /// Too short for the run id to fit.
    #[error(
        "max_len {0} is too short for a name that carries the run id: it needs {LONGEST_NAME} \
         (prefix, run id, test tag, counter)"
    )]
    TooShort(usize),
}

impl Naming {
    /// Names joined by `separator` (`-`, `_` or `.`), at most `max_len`
    /// long; the error says what is wrong.
    pub fn new(separator: char, max_len: usize) -> Result<Naming, NamingError> {
        if !matches!(separator, '-' | '_' | '.') {
            return Err(NamingError::Separator(separator));
        }
        if max_len < LONGEST_NAME {
            return Err(NamingError::TooShort(max_len));
        }
        Ok(Naming { separator, max_len })
    }

    /// The separator.
    pub(crate) fn separator(&self) -> char {
        self.separator
    }

    /// The `n`th name of a test (`n` from 1).
    pub fn name(&self, prefix: &str, run_id: &str, tag: &str, n: u32) -> String {
        let s = self.separator;
        format!("{prefix}{s}{run_id}{s}{tag}{s}{n:02}")
    }

    /// What every name of the run starts with: `<prefix><sep><run id><sep>`.
    pub fn run_prefix(&self, prefix: &str, run_id: &str) -> String {
        let s = self.separator;
        format!("{prefix}{s}{run_id}{s}")
    }

    /// Whether `name` is one the run `run_id` may own: it starts with the
    /// run's prefix and fits the kind's alphabet and length.
    pub fn carries_run_id(&self, name: &str, prefix: &str, run_id: &str) -> bool {
        let s = self.separator;
        !prefix.is_empty()
            && !run_id.is_empty()
            && name.len() > prefix.len() + run_id.len() + 2
            && name
                .strip_prefix(prefix)
                .and_then(|r| r.strip_prefix(s))
                .and_then(|r| r.strip_prefix(run_id))
                .is_some_and(|r| r.starts_with(s))
            && self.fits(name)
    }

    /// Lowercase letters, digits and the separator, not at either end, at
    /// most `max_len` long.
    pub fn fits(&self, name: &str) -> bool {
        !name.is_empty()
            && name.len() <= self.max_len
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == self.separator)
            && !name.starts_with(self.separator)
            && !name.ends_with(self.separator)
    }
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
        assert!(n.ends_with("-07") && Naming::default().fits(&n), "{n}");
        assert!(name("ct", "abcdefghij", &a, 123).ends_with("-123"));
        // The longest possible: an 8-character prefix and a 16-character run id.
        let long = name("abcdefgh", &"r".repeat(16), &a, 99_999);
        assert!(
            long.len() <= MAX_NAME_LEN && Naming::default().fits(&long),
            "{long}"
        );
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
    fn a_kind_s_naming_fits_its_alphabet() {
        let underscore = Naming::new('_', 40).unwrap();
        let n = underscore.name("pb", "abcdefghij", "tag123", 3);
        assert_eq!(n, "pb_abcdefghij_tag123_03");
        assert!(underscore.carries_run_id(&n, "pb", "abcdefghij"));
        assert!(!underscore.carries_run_id("pb-abcdefghij-tag123-03", "pb", "abcdefghij"));
        assert!(!Naming::default().carries_run_id(&n, "pb", "abcdefghij"));
        assert_eq!(underscore.run_prefix("pb", "r1"), "pb_r1_");
        assert!(Naming::new('/', 40)
            .unwrap_err()
            .to_string()
            .contains("separator"));
        assert!(Naming::new('_', 12)
            .unwrap_err()
            .to_string()
            .contains("too short"));
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
