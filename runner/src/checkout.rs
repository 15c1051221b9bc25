//! Which testkit sources the runner uses: a checkout of the testkit
//! repository (a suite made by `new` depends on its `testkit` crate by
//! path, and the default pod is built from its `sandboxd`), or the registry
//! (`new` writes `testkit = "<this runner's version>"`, and the default pod
//! is an installed `sandboxd`).
//!
//! `TESTKIT_SOURCES` says which: a checkout's folder, or `none`. Unset, it
//! is the checkout this runner was built from while that checkout is still
//! there, and the registry otherwise (a runner installed from a registry).

use std::ffi::OsStr;
use std::fmt;
use std::path::{Path, PathBuf};

/// The variable that says which sources the runner uses.
pub(crate) const VAR: &str = testkit_engine::settings::var::SOURCES;

/// This runner's version: the testkit version a suite gets from the
/// registry, and the `sandboxd` version to install.
pub(crate) const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where testkit's sources come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sources {
    /// A checkout of the testkit repository: its root folder.
    Checkout(PathBuf),
    /// The registry, at this runner's version.
    Registry,
}

impl Sources {
    /// The sources `TESTKIT_SOURCES` names, else the default.
    pub(crate) fn from_env() -> Result<Sources, SourcesError> {
        Sources::from_value(std::env::var_os(VAR).as_deref(), built_from())
    }

    /// The sources `value` (the variable's, if set) names; `built_from` is
    /// the checkout this runner was built from, if it is still there.
    fn from_value(
        value: Option<&OsStr>,
        built_from: Option<PathBuf>,
    ) -> Result<Sources, SourcesError> {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return Ok(built_from.map_or(Sources::Registry, Sources::Checkout));
        };
        if value == "none" {
            return Ok(Sources::Registry);
        }
        // Absolute, so that it means the same folder wherever it is used
        // from (`run` builds the default pod with the checkout as its
        // working directory).
        let dir = std::path::absolute(value).unwrap_or_else(|_| PathBuf::from(value));
        if is_checkout(&dir) {
            Ok(Sources::Checkout(dir))
        } else {
            Err(SourcesError {
                value: value.to_string_lossy().into_owned(),
            })
        }
    }

    /// The checkout's folder, if the sources are a checkout's.
    pub(crate) fn checkout(&self) -> Option<&Path> {
        match self {
            Sources::Checkout(dir) => Some(dir),
            Sources::Registry => None,
        }
    }
}

/// Where a person reads the book's page `pointer` (`book/src/PAGE.md`,
/// with an `#anchor` or not): in the checkout the runner uses, else in
/// the repository under this version's tag, for a runner installed from
/// a registry, which has no book beside it.
pub(crate) fn book_page(pointer: &str) -> String {
    book_page_in(
        Sources::from_env()
            .ok()
            .as_ref()
            .and_then(Sources::checkout),
        pointer,
    )
}

/// [`book_page`] in the checkout `checkout`, where it has the page.
pub(crate) fn book_page_in(checkout: Option<&Path>, pointer: &str) -> String {
    let page = pointer.split('#').next().unwrap_or(pointer);
    match checkout.filter(|dir| dir.join(page).is_file()) {
        Some(dir) => dir.join(pointer).display().to_string(),
        None => format!("{}/blob/v{VERSION}/{pointer}", env!("CARGO_PKG_REPOSITORY")),
    }
}

/// A `TESTKIT_SOURCES` that names neither a checkout nor `none`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SourcesError {
    value: String,
}

impl fmt::Display for SourcesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{VAR}={:?} is not a testkit checkout (a folder with testkit/Cargo.toml and \
             runner/Cargo.toml): set it to the folder of a testkit checkout, to `none` for \
             testkit {VERSION} from the registry, or unset it",
            self.value
        )
    }
}

impl std::error::Error for SourcesError {}

/// Whether `dir` is the root of a testkit checkout.
fn is_checkout(dir: &Path) -> bool {
    ["testkit", "runner"]
        .iter()
        .all(|member| dir.join(member).join("Cargo.toml").is_file())
}

/// The checkout this runner was built from, while it is still there. A
/// runner built from a registry's package is in a folder named
/// `testkit-runner-VERSION`, not `runner`, beside no `testkit` folder.
fn built_from() -> Option<PathBuf> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    if crate_dir.file_name()? != "runner" {
        return None;
    }
    let root = crate_dir.parent()?;
    is_checkout(root).then(|| root.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for member in ["testkit", "runner"] {
            std::fs::create_dir(dir.path().join(member)).unwrap();
            std::fs::write(dir.path().join(member).join("Cargo.toml"), "").unwrap();
        }
        dir
    }

    #[test]
    fn unset_is_the_checkout_built_from_else_the_registry() {
        let built = PathBuf::from("/src/testkit");
        for unset in [None, Some(OsStr::new(""))] {
            assert_eq!(
                Sources::from_value(unset, Some(built.clone())),
                Ok(Sources::Checkout(built.clone()))
            );
            assert_eq!(Sources::from_value(unset, None), Ok(Sources::Registry));
        }
    }

    #[test]
    fn none_is_the_registry_and_a_checkout_is_taken() {
        let built = Some(PathBuf::from("/src/testkit"));
        assert_eq!(
            Sources::from_value(Some(OsStr::new("none")), built.clone()),
            Ok(Sources::Registry)
        );
        let other = checkout();
        assert_eq!(
            Sources::from_value(Some(other.path().as_os_str()), built),
            Ok(Sources::Checkout(other.path().to_owned()))
        );
    }

    #[test]
    fn a_book_page_is_a_file_of_a_checkout_or_a_url_of_this_version() {
        // This runner is built from a checkout: its page is a file there.
        let page = book_page("book/src/writing-tests.md");
        assert!(std::path::Path::new(&page).is_file(), "{page}");
        assert!(env!("CARGO_PKG_REPOSITORY").starts_with("https://"));
    }

    #[test]
    fn a_relative_checkout_is_made_absolute() {
        // Unit tests run in the crate's folder: `..` is this checkout.
        match Sources::from_value(Some(OsStr::new("..")), None) {
            Ok(Sources::Checkout(dir)) => assert!(dir.is_absolute(), "{}", dir.display()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn anything_else_is_an_error_naming_the_variable_and_the_mend() {
        let empty = tempfile::tempdir().unwrap();
        for value in [
            OsStr::new("None"),
            OsStr::new("/nonexistent/testkit"),
            empty.path().as_os_str(),
        ] {
            let error = Sources::from_value(Some(value), None).unwrap_err();
            let message = error.to_string();
            assert!(message.starts_with("TESTKIT_SOURCES="), "{message}");
            assert!(
                message.contains(&value.to_string_lossy().to_string()),
                "{message}"
            );
            assert!(message.contains("`none`"), "{message}");
            assert!(message.contains(VERSION), "{message}");
        }
    }

    #[test]
    fn this_runner_was_built_from_a_checkout() {
        let built = built_from().expect("the checkout this runner was built from");
        assert!(built.join("testkit/Cargo.toml").is_file(), "{built:?}");
    }
}
