//! Secrets and their redaction.
//!
//! A secret (a pod's token, its session) is registered once; every place that
//! writes output a person or a CI system will read (failure messages, logs,
//! records, JUnit, artifacts) passes its text through [`redact`]. Redaction
//! happens where output is written, so a test that prints a secret by
//! mistake still leaks nothing.

use std::borrow::Cow;
use std::sync::RwLock;

pub mod stdio;

/// What a secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Secrets shorter than this are not registered: replacing a two-letter
/// string everywhere would garble output and protect nothing.
const MIN_SECRET_LEN: usize = 6;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Registers `secret` so that it never appears in output.
pub fn register_secret(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    let mut secrets = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    if !secrets.iter().any(|s| s == secret) {
        secrets.push(secret.to_owned());
        // Longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// `text` with every registered secret replaced by [`REDACTED`].
pub fn redact(text: &str) -> Cow<'_, str> {
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    if !secrets.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_every_occurrence_and_leaves_other_text_alone() {
        register_secret("tok-abcdef-123");
        assert_eq!(
            redact("a tok-abcdef-123 b tok-abcdef-123"),
            "a [REDACTED] b [REDACTED]"
        );
        assert!(matches!(redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn short_strings_are_not_secrets() {
        register_secret("ab");
        assert_eq!(redact("about"), "about");
    }
}
