//! `KNOWN-ISSUES.md`: the suite's list of known product bugs.
//!
//! The file sits at the suite's workspace root. Each entry is a level-2
//! heading `## ID: Title`, followed by free text saying what is wrong and at
//! least one link (`http://` or `https://`) to where the bug is tracked:
//!
//! ```markdown
//! # Known issues
//!
//! ## SBX-1: exec ignores per-call env
//! `POST /api/sandboxes/{name}/exec` drops the `env` of the request.
//! https://tracker.example/SBX-1
//! ```
//!
//! An id starts with a letter or digit and holds letters, digits, `-`, `_`
//! and `.`. Text before the first `##` heading is free. Ids are unique.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The file name of a suite's known issues, at its workspace root.
pub const KNOWN_ISSUES_FILE: &str = "KNOWN-ISSUES.md";

/// One entry of `KNOWN-ISSUES.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KnownIssue {
    /// The id, e.g. `SBX-1`.
    pub id: String,
    /// The title after the id.
    pub title: String,
    /// What is wrong: the text under the heading, trimmed.
    pub body: String,
    /// The first link in the body.
    pub link: String,
    /// The 1-based line of the heading.
    pub line: usize,
}

/// A parsed `KNOWN-ISSUES.md`.
#[derive(Debug, Clone)]
pub struct KnownIssues {
    path: PathBuf,
    entries: Vec<KnownIssue>,
}

/// A `KNOWN-ISSUES.md` that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KnownIssuesError {
    /// The file exists but cannot be read.
    #[error("failed to read {}: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
    },
    /// An entry breaks the format.
    #[error("invalid {}:{line}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The 1-based line of the entry's heading.
        line: usize,
        /// What is wrong and how to write it instead.
        problem: String,
    },
}

impl KnownIssues {
    /// Loads `<suite_dir>/KNOWN-ISSUES.md`; a missing file is an empty list.
    pub fn load(suite_dir: &Path) -> Result<KnownIssues, KnownIssuesError> {
        let path = suite_dir.join(KNOWN_ISSUES_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => KnownIssues::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(KnownIssues {
                path,
                entries: Vec::new(),
            }),
            Err(source) => Err(KnownIssuesError::Read {
                path,
                cause: source,
            }),
        }
    }

    /// Parses the text of a `KNOWN-ISSUES.md`; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<KnownIssues, KnownIssuesError> {
        let invalid = |line: usize, problem: String| KnownIssuesError::Invalid {
            path: path.to_owned(),
            line,
            problem,
        };
        let mut entries: Vec<KnownIssue> = Vec::new();
        let mut body: Vec<&str> = Vec::new();
        let mut in_fence = false;
        let finish = |entries: &mut Vec<KnownIssue>,
                      body: &mut Vec<&str>|
         -> Result<(), KnownIssuesError> {
            if let Some(entry) = entries.last_mut() {
                entry.body = body.join("\n").trim().to_owned();
                entry.link = first_link(&entry.body).ok_or_else(|| {
                    invalid(
                        entry.line,
                        format!("entry {} has no link: add the URL where the bug is tracked under its heading", entry.id),
                    )
                })?;
            }
            body.clear();
            Ok(())
        };
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
            }
            let heading = if in_fence {
                None
            } else {
                line.strip_prefix("## ")
            };
            let Some(heading) = heading else {
                if !entries.is_empty() {
                    body.push(line);
                }
                continue;
            };
            finish(&mut entries, &mut body)?;
            let Some((id, title)) = heading.split_once(':') else {
                return Err(invalid(
                    number,
                    format!("heading {line:?} is not `## ID: Title`"),
                ));
            };
            let (id, title) = (id.trim(), title.trim());
            if !valid_id(id) {
                return Err(invalid(
                    number,
                    format!("{id:?} is not a valid id: use letters, digits, `-`, `_` and `.`, e.g. `## SBX-1: Title`"),
                ));
            }
            if title.is_empty() {
                return Err(invalid(
                    number,
                    format!("entry {id} has no title: write `## {id}: what is wrong`"),
                ));
            }
            if let Some(first) = entries.iter().find(|e| e.id == id) {
                return Err(invalid(
                    number,
                    format!("entry {id} is listed twice (first at line {})", first.line),
                ));
            }
            entries.push(KnownIssue {
                id: id.to_owned(),
                title: title.to_owned(),
                body: String::new(),
                link: String::new(),
                line: number,
            });
        }
        finish(&mut entries, &mut body)?;
        Ok(KnownIssues {
            path: path.to_owned(),
            entries,
        })
    }

    /// The file this list came from (it may not exist).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry, in file order.
    pub fn entries(&self) -> &[KnownIssue] {
        &self.entries
    }

    /// The entry with this id.
    pub fn get(&self, id: &str) -> Option<&KnownIssue> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// Entries that no test pins, given the ids that tests pin: each one is
    /// stale and should be closed or pinned.
    pub fn stale<'a>(&self, pinned: impl IntoIterator<Item = &'a str>) -> Vec<&KnownIssue> {
        let pinned: BTreeSet<&str> = pinned.into_iter().collect();
        self.entries
            .iter()
            .filter(|e| !pinned.contains(e.id.as_str()))
            .collect()
    }

    /// Why `id` cannot be used as a known issue, or `Ok` when it is listed.
    pub fn check_listed(&self, id: &str) -> Result<&KnownIssue, NotListed> {
        self.get(id).ok_or_else(|| NotListed {
            id: id.to_owned(),
            file: self.path.clone(),
            file_exists: self.path.is_file(),
        })
    }
}

/// A known issue a test names that its suite's file does not list.
#[derive(Debug, thiserror::Error)]
#[error(
    "known issue {id} is not listed{}: {}add a heading `## {id}: <title>` followed by what \
     is wrong and a link to the bug",
    if *file_exists { format!(" in {}", file.display()) } else { String::new() },
    if *file_exists { String::new() } else { format!("{} does not exist; create it and ", file.display()) }
)]
pub struct NotListed {
    /// The id.
    pub id: String,
    /// The suite's `KNOWN-ISSUES.md`.
    pub file: PathBuf,
    /// Whether that file exists.
    pub file_exists: bool,
}

fn valid_id(id: &str) -> bool {
    id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn first_link(text: &str) -> Option<String> {
    let start = text.find("https://").or_else(|| text.find("http://"))?;
    let link: String = text[start..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, ')' | '>' | ']' | '"' | '\''))
        .collect();
    Some(link.trim_end_matches(['.', ',', ';']).to_owned())
}

/// Where a test pins a known issue in the sources.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PinnedAt {
    /// The source file.
    pub file: PathBuf,
    /// The 1-based line of `known_issue = "ID"`.
    pub line: usize,
}

/// The known-issue ids that `#[testkit::test(known_issue = "ID")]`
/// attributes pin in the `.rs` files under `dir` (`target` and hidden
/// directories skipped), with where each one is pinned. Finds stale entries
/// without building or running the suite.
pub(crate) fn pinned_in_sources(dir: &Path) -> std::io::Result<BTreeMap<String, Vec<PinnedAt>>> {
    let mut pinned: BTreeMap<String, Vec<PinnedAt>> = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if entry.file_type()?.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                let text = std::fs::read_to_string(&path)?;
                for (index, line) in text.lines().enumerate() {
                    for id in pins_in_line(line) {
                        pinned.entry(id).or_default().push(PinnedAt {
                            file: path.clone(),
                            line: index + 1,
                        });
                    }
                }
            }
        }
    }
    for places in pinned.values_mut() {
        places.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    }
    Ok(pinned)
}

fn pins_in_line(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut ids = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("known_issue") {
        rest = &rest[at + "known_issue".len()..];
        let after = rest.trim_start();
        let Some(after) = after.strip_prefix('=') else {
            continue;
        };
        let Some(after) = after.trim_start().strip_prefix('"') else {
            continue;
        };
        if let Some(end) = after.find('"') {
            ids.push(after[..end].to_owned());
        }
    }
    ids
}

/// The result of [`check_known_issues`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct KnownIssuesCheck {
    /// The file checked.
    pub path: PathBuf,
    /// Entries no test pins: close them, or pin the test that shows the bug.
    pub stale: Vec<KnownIssue>,
    /// Ids that tests pin but the file does not list, with where.
    pub unlisted: BTreeMap<String, Vec<PinnedAt>>,
}

impl KnownIssuesCheck {
    /// Nothing stale and nothing unlisted.
    pub fn ok(&self) -> bool {
        self.stale.is_empty() && self.unlisted.is_empty()
    }
}

impl std::fmt::Display for KnownIssuesCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.ok() {
            return write!(
                f,
                "{}: every entry is pinned by a test and every pinned id is listed",
                self.path.display()
            );
        }
        for entry in &self.stale {
            writeln!(
                f,
                "stale: {}:{}: {} ({}) is pinned by no test: remove the entry once the bug is fixed, \
                 or pin the test that shows it with `known_issue = \"{}\"`",
                self.path.display(),
                entry.line,
                entry.id,
                entry.title,
                entry.id
            )?;
        }
        for (id, places) in &self.unlisted {
            for at in places {
                writeln!(
                    f,
                    "unlisted: {}:{}: pins {id}, which {} does not list: add `## {id}: <title>` with a link",
                    at.file.display(),
                    at.line,
                    self.path.display()
                )?;
            }
        }
        Ok(())
    }
}

/// The CI check of a suite's known issues: loads `KNOWN-ISSUES.md` at
/// `suite_dir`, scans the suite's sources for pinned ids, and reports stale
/// entries and unlisted ids.
pub fn check_known_issues(suite_dir: &Path) -> Result<KnownIssuesCheck, KnownIssuesError> {
    let known = KnownIssues::load(suite_dir)?;
    let pinned = pinned_in_sources(suite_dir).map_err(|source| KnownIssuesError::Read {
        path: suite_dir.to_owned(),
        cause: source,
    })?;
    let stale = known
        .stale(pinned.keys().map(String::as_str))
        .into_iter()
        .cloned()
        .collect();
    let unlisted = pinned
        .into_iter()
        .filter(|(id, _)| known.get(id).is_none())
        .collect();
    Ok(KnownIssuesCheck {
        path: known.path,
        stale,
        unlisted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<KnownIssues, KnownIssuesError> {
        KnownIssues::parse(text, Path::new("/s/KNOWN-ISSUES.md"))
    }

    #[test]
    fn parses_entries_with_body_and_link() {
        let known = parse(
            "# Known issues\n\nintro\n\n## SBX-1: exec ignores per-call env\nThe env is dropped.\n\
             See <https://bugs.example/SBX-1>.\n\n## ab_2.x: other\n```\n## not a heading\n```\nhttp://x.example/2\n",
        )
        .unwrap();
        let ids: Vec<_> = known.entries().iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["SBX-1", "ab_2.x"]);
        let first = known.get("SBX-1").unwrap();
        assert_eq!(first.title, "exec ignores per-call env");
        assert_eq!(first.link, "https://bugs.example/SBX-1");
        assert_eq!(first.line, 5);
        assert!(first.body.starts_with("The env is dropped."));
        assert_eq!(known.get("ab_2.x").unwrap().link, "http://x.example/2");
        assert_eq!(known.stale(["SBX-1"]).len(), 1);
    }

    #[test]
    fn format_errors_name_the_line_and_fix() {
        let e = parse("## SBX-1 no colon\n").unwrap_err().to_string();
        assert!(
            e.contains("/s/KNOWN-ISSUES.md:1") && e.contains("## ID: Title"),
            "{e}"
        );
        let e = parse("## SBX-1: t\nno link\n").unwrap_err().to_string();
        assert!(e.contains("has no link"), "{e}");
        let e = parse("## A: t\nhttps://x\n## A: u\nhttps://y\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains(":3") && e.contains("twice"), "{e}");
        let e = parse("## bad id: t\nhttps://x\n").unwrap_err().to_string();
        assert!(e.contains("not a valid id"), "{e}");
    }

    #[test]
    fn unlisted_ids_name_the_heading_to_add() {
        let known = parse("## A: t\nhttps://x\n").unwrap();
        assert!(known.check_listed("A").is_ok());
        let e = known.check_listed("SBX-9").unwrap_err().to_string();
        assert!(
            e.contains("## SBX-9: <title>") && e.contains("/s/KNOWN-ISSUES.md"),
            "{e}"
        );
    }

    #[test]
    fn finds_pins_in_attributes_only() {
        assert_eq!(
            pins_in_line(r#"#[testkit::test(known_issue = "SBX-1", fails_with = "x")]"#),
            ["SBX-1"]
        );
        assert_eq!(
            pins_in_line(r#"#[testkit::test(known_issue="A")] // known_issue = "B""#),
            ["A"]
        );
        assert!(pins_in_line("let known_issue = other;").is_empty());
    }
}
