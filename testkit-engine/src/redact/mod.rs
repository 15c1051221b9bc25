//! Secrets and their redaction.
//!
//! A secret (a pod's token, its session) is registered once; every place that
//! writes output a person or a CI system will read (failure messages, logs,
//! records, JUnit, artifacts) passes its text through [`redact`]. Redaction
//! happens where output is written, so a test that prints a secret by
//! mistake still leaks nothing.
//!
//! A process redacts only what it knows, and a credential obtained by one
//! process of a run (a test's renewal, a login after an expiry) is unknown
//! to the others, the runner included, which copies the pod's logs. So each
//! process that obtains one also records (`record_secret`) it in the run's
//! ledger, `<secrets dir>/credentials` (mode 0600, never in the results
//! folder), and a process about to write what others may have seen
//! [registers the ledger](register_recorded) first.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;
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

/// Words that name a credential in a URL's query parameter (`?token=…`,
/// `api_key`, `X-Amz-Signature`, `password`): their values are hidden in
/// what testkit writes of a URL even when nobody registered them, since a
/// test may have got them from the product itself. A name is split into
/// words (at `_`, `-`, `.` and lower-to-upper case changes), so that
/// `author` or `monkey` are not taken for `auth` or `key`.
const SECRET_WORDS: &[&str] = &[
    "token",
    "key",
    "apikey",
    "secret",
    "password",
    "passwd",
    "pass",
    "pwd",
    "auth",
    "sig",
    "signature",
    "credential",
    "credentials",
    "session",
    "sessionid",
    "sid",
    "jwt",
    "bearer",
    "authorization",
    "accesstoken",
    "refreshtoken",
    "idtoken",
    "apitoken",
    "authtoken",
    "authkey",
    "apisecret",
    "clientsecret",
    "privatekey",
    "jsessionid",
    "phpsessid",
    "passphrase",
    "assertion",
    "verifier",
    "samlresponse",
];

/// `url` redacted ([`redact`]), with its user info (the password, or a
/// user name alone, which is a token as often as not) and the value of
/// each query or fragment parameter whose name holds a word that names a
/// credential (`token`, `key`, `secret`, `password`, `auth`, `signature`,
/// `session`, …) replaced by [`REDACTED`].
pub fn redact_url(url: &str) -> String {
    let url = redact(url);
    let (before, fragment) = match url.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (url.as_ref(), None),
    };
    let (base, query) = match before.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (before, None),
    };
    let mut out = match base.split_once("//") {
        Some((scheme, rest)) => {
            let (authority, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            match authority.rsplit_once('@') {
                Some((user_info, host)) => match user_info.split_once(':') {
                    Some((user, _)) => format!("{scheme}//{user}:{REDACTED}@{host}{path}"),
                    None => format!("{scheme}//{REDACTED}@{host}{path}"),
                },
                None => base.to_owned(),
            }
        }
        None => base.to_owned(),
    };
    if let Some(query) = query {
        out.push('?');
        out.push_str(&redact_params(query));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(&redact_params(fragment));
    }
    out
}

/// `params` (`a=1&token=x;b=2`), each value whose name holds a credential
/// replaced by [`REDACTED`].
fn redact_params(params: &str) -> String {
    let mut out = String::with_capacity(params.len());
    for pair in params.split_inclusive(['&', ';']) {
        let (pair, separator) = match pair.strip_suffix(['&', ';']) {
            Some(p) => (p, &pair[p.len()..]),
            None => (pair, ""),
        };
        match pair.split_once('=') {
            Some((name, value)) if !value.is_empty() && secret_param(name) => {
                out.push_str(name);
                out.push('=');
                out.push_str(REDACTED);
            }
            _ => out.push_str(pair),
        }
        out.push_str(separator);
    }
    out
}

/// Whether a query parameter named `name` (percent-encoded or not) holds
/// a credential: one of its words is one of [`SECRET_WORDS`].
fn secret_param(name: &str) -> bool {
    let name = percent_encoding::percent_decode_str(name).decode_utf8_lossy();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut last_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            words.push(std::mem::take(&mut word));
            last_lower = false;
            continue;
        }
        if c.is_uppercase() && last_lower {
            words.push(std::mem::take(&mut word));
        }
        last_lower = c.is_lowercase() || c.is_numeric();
        word.extend(c.to_lowercase());
    }
    words.push(word);
    words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
}

/// `text` with every `http://` or `https://` URL in it passed through
/// [`redact_url`]: an error's text (reqwest's names the URL it failed on)
/// hides what the URL's credentials would have shown.
pub fn redact_urls_in(text: &str) -> String {
    // Found in any case; ASCII lowercasing keeps every byte's offset.
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(at) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| lower[from..].find(scheme).map(|i| from + i))
        .min()
    {
        out.push_str(&text[from..at]);
        let url = &text[at..];
        let scheme = url.find("://").map_or(0, |i| i + 3);
        // A password may hold `)` or `'` unencoded: the URL runs at
        // least to the `@` of its authority, wherever it ends after.
        let authority = url[scheme..]
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .map_or(url.len(), |i| scheme + i);
        let least = url[..authority].rfind('@').map_or(scheme, |i| i + 1);
        let end = url[least..]
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '<' | '>'))
            .map_or(url.len(), |i| least + i);
        out.push_str(&redact_url(&url[..end]));
        from = at + end;
    }
    out.push_str(&text[from..]);
    out
}

/// The shortest start (or end) of a secret that a cut text may not end
/// (or start) with: a cut that leaves half a secret leaves a guessable
/// secret.
const MIN_PART_LEN: usize = 3;

/// `text` redacted, then cut to at most `max` bytes at a character
/// boundary: the text kept, and how many bytes of the redacted text were
/// cut. Redaction comes first, so that no cut splits a secret the text
/// holds whole; and a kept text whose end is the start of a registered
/// secret (one the text held past the cut, or past what was kept of it
/// before) ends in [`REDACTED`] instead.
pub fn redact_then_cut(text: &str, max: usize) -> (String, usize) {
    let text = redact(text);
    if text.len() <= max {
        return (text.into_owned(), 0);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut kept = text[..end].to_owned();
    mask_cut_end(&mut kept);
    (kept, text.len() - end)
}

/// `text`, a text that was already cut at its end, redacted and cut to at
/// most `max` bytes: as [`redact_then_cut`], but its end is masked
/// whether or not this cut removed anything, since the earlier cut may
/// have split a secret that redaction then pulled within `max`.
pub fn redact_cut_text(text: &str, max: usize) -> (String, usize) {
    let (mut kept, cut) = redact_then_cut(text, max);
    if cut == 0 {
        mask_cut_end(&mut kept);
    }
    (kept, cut)
}

/// `text` redacted, then cut to its last `max` bytes at a character
/// boundary: the text kept, and how many bytes came before it. As
/// [`redact_then_cut`], from the other end.
pub(crate) fn redact_then_cut_start(text: &str, max: usize) -> (String, usize) {
    let text = redact(text);
    if text.len() <= max {
        return (text.into_owned(), 0);
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let mut kept = text[start..].to_owned();
    mask_cut_start(&mut kept);
    (kept, start)
}

/// Replaces the end of `kept`, a text that was cut there, when it is the
/// start of a registered secret.
pub(crate) fn mask_cut_end(kept: &mut String) {
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    let longest = secrets
        .iter()
        .filter_map(|secret| {
            (MIN_PART_LEN..secret.len())
                .rev()
                .filter_map(|n| secret.get(..n))
                .find(|part| kept.ends_with(part))
                .map(str::len)
        })
        .max();
    if let Some(n) = longest {
        kept.truncate(kept.len() - n);
        kept.push_str(REDACTED);
    }
}

/// Replaces the start of `kept`, a text that was cut there, when it is the
/// end of a registered secret.
pub(crate) fn mask_cut_start(kept: &mut String) {
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    let longest = secrets
        .iter()
        .filter_map(|secret| {
            (1..=secret.len() - MIN_PART_LEN)
                .filter_map(|n| secret.get(n..))
                .find(|part| kept.starts_with(part))
                .map(str::len)
        })
        .max();
    if let Some(n) = longest {
        kept.replace_range(..n, REDACTED);
    }
}

/// The run's ledger of credentials, in its secrets dir: one JSON string a
/// line, appended by every process that obtains one.
pub const LEDGER_FILE: &str = "credentials";

/// Registers `secret` and appends it to the ledger of the secrets dir `dir`
/// (created with mode 0600), so that every process of the run can redact
/// it. One `write` on an `O_APPEND` file: lines of concurrent processes do
/// not interleave.
pub(crate) fn record_secret(dir: &Path, secret: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    register_secret(secret);
    if secret.len() < MIN_SECRET_LEN {
        return Ok(());
    }
    let mut line = serde_json::to_string(secret).map_err(std::io::Error::other)?;
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(dir.join(LEDGER_FILE))?
        .write_all(line.as_bytes())
}

/// Registers every secret of the ledger of the secrets dir `dir`: what any
/// process of the run obtained. Returns how many it holds; a missing ledger
/// holds none.
pub fn register_recorded(dir: &Path) -> usize {
    let Ok(text) = std::fs::read_to_string(dir.join(LEDGER_FILE)) else {
        return 0;
    };
    let mut n = 0;
    for secret in text
        .lines()
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
    {
        register_secret(&secret);
        n += 1;
    }
    n
}

/// What is kept of a log that a pod, a node or a tool printed: its first
/// and last half of this, in bytes, whatever it printed.
pub const LOG_KEEP: u64 = 8 << 20;

/// `… N bytes dropped …`, the text between a kept head and tail.
pub fn dropped_marker(dropped: u64) -> String {
    format!("\n… {dropped} bytes dropped …\n")
}

/// Writes to `dst` the text file `src` redacted, kept whole when it holds
/// at most `cap` bytes, else its first and last `cap / 2` bytes around a
/// [`dropped_marker`]. Returns how many bytes were dropped.
///
/// It reads at most `cap` bytes of `src` whatever its size: a pod that
/// prints gigabytes costs the process that keeps its log nothing. `dst` may
/// be `src`: the kept text replaces it atomically, with its permissions.
/// A cut that leaves the start (or end) of a registered secret masks it.
pub fn keep_capped(src: &Path, dst: &Path, cap: u64) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(src)?;
    let meta = file.metadata()?;
    let size = meta.len();
    let mut out = Vec::new();
    let dropped = if size <= cap {
        let mut all = Vec::with_capacity(size as usize);
        // Bounded even if the file grows while it is read.
        (&file).take(cap).read_to_end(&mut all)?;
        out.extend_from_slice(redact(&String::from_utf8_lossy(&all)).as_bytes());
        0
    } else {
        let half = cap / 2;
        let mut head = vec![0; half as usize];
        file.read_exact(&mut head)?;
        file.seek(SeekFrom::Start(size - half))?;
        let mut tail = Vec::with_capacity(half as usize);
        (&file).take(half).read_to_end(&mut tail)?;
        let mut head = redact(&String::from_utf8_lossy(&head)).into_owned();
        mask_cut_end(&mut head);
        let mut tail = redact(&String::from_utf8_lossy(&tail)).into_owned();
        mask_cut_start(&mut tail);
        let dropped = size - 2 * half;
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(dropped_marker(dropped).as_bytes());
        out.extend_from_slice(tail.as_bytes());
        dropped
    };
    drop(file);
    let tmp = dst.with_extension(format!("keep{}", std::process::id()));
    let written = std::fs::write(&tmp, &out)
        .and_then(|()| std::fs::set_permissions(&tmp, meta.permissions()))
        .and_then(|()| std::fs::rename(&tmp, dst));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map(|()| dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_urls_in_an_error_s_text_are_redacted() {
        assert_eq!(
            redact_urls_in(
                "error sending request for url (http://u:pw@127.0.0.1:9/x?access_token=abc&n=1): refused"
            ),
            "error sending request for url (http://u:[REDACTED]@127.0.0.1:9/x?access_token=[REDACTED]&n=1): refused"
        );
        assert_eq!(redact_urls_in("no url here"), "no url here");
        // A password with `)` or `'` in it, as reqwest's Url writes it;
        // a scheme in capitals.
        assert_eq!(
            redact_urls_in("for url (http://user:pa)ss'w@host/): refused"),
            "for url (http://user:[REDACTED]@host/): refused"
        );
        assert_eq!(
            redact_urls_in("see HTTP://u:s3cret@h/x?k=1"),
            "see HTTP://u:[REDACTED]@h/x?k=1"
        );
    }

    #[test]
    fn a_url_s_credentials_are_hidden_whoever_registered_them() {
        assert_eq!(
            redact_url("http://127.0.0.1:9/api/x?prefix=tk&access_token=abc123&Api-Key=k9#top"),
            "http://127.0.0.1:9/api/x?prefix=tk&access_token=[REDACTED]&Api-Key=[REDACTED]#top"
        );
        assert_eq!(
            redact_url("https://admin:hunter2@db.local/query?X-Amz-Signature=f00&limit=5"),
            "https://admin:[REDACTED]@db.local/query?X-Amz-Signature=[REDACTED]&limit=5"
        );
        // Nothing to hide: the URL as it was.
        for plain in [
            "http://127.0.0.1:9/api/sandboxes?limit=1000&prefix=tk",
            "/api/x?token=",
            "http://h/p",
            "http://h/p?author=me&design=x&monkey=1&sign=up",
        ] {
            assert_eq!(redact_url(plain), plain);
        }
        assert_eq!(
            redact_url("https://ghp_abcdef123@github.com/o/r?a=1;sessionId=s1#access_token=t2&x=y"),
            "https://[REDACTED]@github.com/o/r?a=1;sessionId=[REDACTED]#access_token=[REDACTED]&x=y"
        );
        assert_eq!(
            redact_url("http://h/x?Authorization=a1&accesstoken=a2&JSESSIONID=a3&code_verifier=a4"),
            "http://h/x?Authorization=[REDACTED]&accesstoken=[REDACTED]&JSESSIONID=[REDACTED]&code_verifier=[REDACTED]"
        );
        assert_eq!(
            redact_url("//u:p@h/x?%74oken=abc"),
            "//u:[REDACTED]@h/x?%74oken=[REDACTED]"
        );
    }

    #[test]
    fn a_log_over_its_cap_keeps_its_ends_redacted_and_names_what_it_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let (src, dst) = (dir.path().join("raw"), dir.path().join("kept"));
        register_secret("sekrit-log-cap-0123");
        let mut text = String::from("first line sekrit-log-cap-0123\n");
        text.push_str(&"x".repeat(3 << 20));
        text.push_str("\nlast line sekrit-log-cap-0123\n");
        std::fs::write(&src, &text).unwrap();
        let dropped = keep_capped(&src, &dst, 1 << 20).unwrap();
        let kept = std::fs::read_to_string(&dst).unwrap();
        assert_eq!(dropped, text.len() as u64 - (1 << 20));
        assert!(kept.len() < (1 << 20) + 100, "{} bytes kept", kept.len());
        assert!(
            kept.starts_with("first line [REDACTED]\n"),
            "{}",
            &kept[..40]
        );
        assert!(kept.ends_with("last line [REDACTED]\n"));
        assert!(kept.contains(&dropped_marker(dropped)));
        assert!(!kept.contains("sekrit-log-cap"));
    }

    #[test]
    fn a_cut_through_a_secret_masks_the_part_it_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("raw");
        register_secret("straddling-secret-98765");
        // The cut of the head (at 50 bytes) falls inside the secret.
        let text = format!(
            "{}straddling-secret-98765{}",
            "a".repeat(40),
            "b".repeat(200)
        );
        std::fs::write(&src, &text).unwrap();
        keep_capped(&src, &src, 100).unwrap();
        let kept = std::fs::read_to_string(&src).unwrap();
        assert!(
            kept.starts_with(&format!("{}[REDACTED]\n…", "a".repeat(40))),
            "{kept}"
        );
        assert!(!kept.contains("straddling"), "{kept}");
    }

    #[test]
    fn a_log_within_its_cap_is_kept_whole_and_redacted_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("raw");
        register_secret("in-place-secret-4242");
        std::fs::write(&src, "a in-place-secret-4242 b\n").unwrap();
        assert_eq!(keep_capped(&src, &src, 1 << 20).unwrap(), 0);
        assert_eq!(std::fs::read_to_string(&src).unwrap(), "a [REDACTED] b\n");
    }

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
    fn a_recorded_secret_is_registered_by_whoever_reads_the_ledger() {
        let dir = tempfile::tempdir().unwrap();
        record_secret(dir.path(), "ledger-secret-1").unwrap();
        record_secret(dir.path(), "ledger \"secret\" 2").unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(LEDGER_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o077,
            0,
            "the ledger is readable by others: {mode:o}"
        );
        assert_eq!(register_recorded(dir.path()), 2);
        assert_eq!(redact("a ledger \"secret\" 2 b"), "a [REDACTED] b");
    }

    #[test]
    fn a_cut_never_keeps_part_of_a_secret() {
        let secret = "cut-secret-0123456789abcdefghijklmnopqrstu";
        register_secret(secret);
        // The secret straddles the cut at every offset.
        for at in 1..secret.len() {
            let text = format!("{}{secret} after", "x".repeat(100 - at));
            let (kept, cut) = redact_then_cut(&text, 100);
            assert!(
                !kept.contains(&secret[..at.max(MIN_PART_LEN)]),
                "{at}: {kept}"
            );
            assert!(
                kept.len() <= 100 && kept.len() + cut == text.len() - secret.len() + REDACTED.len(),
                "{at}: {kept}"
            );
            let (kept, _) = redact_then_cut_start(&text, secret.len() - at + 6);
            assert!(
                !kept.contains(&secret[at.min(secret.len() - MIN_PART_LEN)..]),
                "{at}: {kept}"
            );
        }
        // What was kept of a text before the secret was known, cut there.
        let mut kept = format!("body {}", &secret[..21]);
        mask_cut_end(&mut kept);
        assert_eq!(kept, "body [REDACTED]");
        let mut kept = format!("{} tail", &secret[22..]);
        mask_cut_start(&mut kept);
        assert_eq!(kept, "[REDACTED] tail");
        assert_eq!(redact_then_cut("short", 100), ("short".to_owned(), 0));
    }

    #[test]
    fn short_strings_are_not_secrets() {
        register_secret("ab");
        assert_eq!(redact("about"), "about");
    }
}
