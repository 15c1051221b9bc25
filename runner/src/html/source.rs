//! What a run tested: the suite's commit and whether its tree was dirty,
//! asked of git in the suite dir when the run ends and kept in
//! `<results>/source.json`, so that a report built later (by `merge`, or
//! `report` on another machine) still says it.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Source {
    /// The suite dir the run was given.
    pub(crate) suite: String,
    /// `HEAD`'s commit; none when the suite is not in a git checkout.
    pub(crate) commit: Option<String>,
    /// Whether the tree had changes (tracked or untracked, not ignored).
    pub(crate) dirty: Option<bool>,
}

/// The file in a results folder.
pub(super) const FILE: &str = "source.json";

impl Source {
    /// Asks git in `suite_dir`. Not a checkout (or no git) gives `None`s.
    pub(crate) fn of(suite_dir: &Path) -> Source {
        let git = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(suite_dir)
                .args(args)
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let commit = git(&["rev-parse", "--verify", "HEAD"])
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty());
        let dirty = commit
            .as_ref()
            .and_then(|_| git(&["status", "--porcelain"]))
            .map(|s| !s.trim().is_empty());
        Source {
            suite: suite_dir.display().to_string(),
            commit,
            dirty,
        }
    }

    /// Writes `<results>/source.json`.
    pub(crate) fn write(&self, results_dir: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(results_dir.join(FILE), text)
    }

    /// Reads `<results>/source.json`, if the run left one.
    pub(crate) fn read(results_dir: &Path) -> Option<Source> {
        let text = std::fs::read_to_string(results_dir.join(FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// `abc123 (clean)`, `abc123 (dirty: uncommitted changes)`, or
    /// `unknown (… is not a git checkout)`.
    pub(crate) fn describe(&self) -> String {
        match (&self.commit, self.dirty) {
            (Some(c), Some(false)) => format!("{c} (clean)"),
            (Some(c), Some(true)) => format!("{c} (dirty: uncommitted changes)"),
            (Some(c), None) => format!("{c} (dirty: unknown)"),
            (None, _) => format!("unknown ({} is not a git checkout)", self.suite),
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn a_folder_outside_git_is_unknown_and_a_checkout_says_commit_and_dirt() {
        let dir = tempfile::tempdir().unwrap();
        let outside = Source::of(dir.path());
        assert_eq!((outside.commit.as_deref(), outside.dirty), (None, None));
        assert!(outside.describe().starts_with("unknown ("));

        let git = |args: &[&str]| {
            let ok = Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(dir.path().join("a"), "1").unwrap();
        git(&["add", "a"]);
        git(&["commit", "-q", "-m", "one"]);
        let clean = Source::of(dir.path());
        let commit = clean.commit.clone().expect("a commit");
        assert_eq!(commit.len(), 40);
        assert_eq!(clean.dirty, Some(false));
        std::fs::write(dir.path().join("a"), "2").unwrap();
        let dirty = Source::of(dir.path());
        assert_eq!(dirty.dirty, Some(true));
        assert!(dirty.describe().contains("dirty"), "{}", dirty.describe());

        dirty.write(dir.path()).unwrap();
        assert_eq!(Source::read(dir.path()), Some(dirty));
    }
}
