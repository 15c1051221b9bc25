//! Every workspace of the repository with its own `Cargo.lock` (the suites,
//! the fixtures, the bench) resolves the crates it shares with the root
//! workspace to versions the root's lockfile holds. A drift means two builds of one crate in
//! a shared target dir, and a suite tested against other dependencies than
//! the framework was: this test names the crate, both versions and the file.
//! Their manifests set the root's profiles, for the same reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Crate name → the versions a lockfile holds (a crate can appear in several).
type Versions = BTreeMap<String, BTreeSet<String>>;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("testkit sits in the repository root")
        .to_owned()
}

fn read_lock(path: &Path) -> Versions {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
    let doc: toml::Table = toml::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid TOML: {e}", path.display()));
    let mut versions = Versions::new();
    let packages = doc.get("package").and_then(toml::Value::as_array);
    for package in packages.into_iter().flatten() {
        let (Some(name), Some(version)) = (
            package.get("name").and_then(toml::Value::as_str),
            package.get("version").and_then(toml::Value::as_str),
        ) else {
            panic!("{}: a [[package]] without name or version", path.display());
        };
        // Path dependencies (testkit itself, the suite's own crates) carry no
        // source: their versions are the workspace's business, not the lock's.
        if package.get("source").is_none() {
            continue;
        }
        versions
            .entry(name.to_owned())
            .or_default()
            .insert(version.to_owned());
    }
    versions
}

/// The `Cargo.lock` files of `<root>/<dir>/*/`, if `dir` exists.
fn locks_under(root: &Path, dir: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
        return Vec::new();
    };
    let mut locks: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path().join("Cargo.lock"))
        .filter(|p| p.is_file())
        .collect();
    locks.sort();
    locks
}

fn other_locks(root: &Path) -> Vec<PathBuf> {
    let mut locks = Vec::new();
    for dir in ["suites", "testkit/tests/fixtures", "runner/tests/fixtures"] {
        locks.extend(locks_under(root, dir));
    }
    let bench = root.join("bench/Cargo.lock");
    if bench.is_file() {
        locks.push(bench);
    }
    locks
}

/// The drift of another lockfile from the root's, one line per crate present
/// in both where the other holds a version the root does not. Holding fewer
/// of the root's versions is no drift: a suite needs a subset of the root's
/// graph (the root may carry two majors of a crate, a suite only one).
fn drift(root: &Versions, other: &Versions, file: &Path) -> Vec<String> {
    other
        .iter()
        .filter_map(|(name, theirs)| {
            let ours = root.get(name)?;
            (!theirs.is_subset(ours)).then(|| {
                format!(
                    "{name}: {} has {}, the root Cargo.lock has {}",
                    file.display(),
                    join(theirs),
                    join(ours)
                )
            })
        })
        .collect()
}

fn join(versions: &BTreeSet<String>) -> String {
    versions.iter().cloned().collect::<Vec<_>>().join(" and ")
}

#[test]
fn shared_crates_have_the_root_lockfiles_versions() {
    let root = repo_root();
    let root_versions = read_lock(&root.join("Cargo.lock"));
    let mut problems = Vec::new();
    for lock in other_locks(&root) {
        let shown = lock.strip_prefix(&root).unwrap_or(&lock).to_owned();
        problems.extend(drift(&root_versions, &read_lock(&lock), &shown));
    }
    assert!(
        problems.is_empty(),
        "lockfiles drifted from the root Cargo.lock:\n  {}\n\
         Bring them back: copy the root Cargo.lock over the drifted one and run `cargo metadata` \
         in its workspace (never `cargo update` there), or update the root first.",
        problems.join("\n  ")
    );
}

#[test]
fn a_drift_names_the_crate_both_versions_and_the_file() {
    let root: Versions = [("tokio".to_owned(), BTreeSet::from(["1.54.1".to_owned()]))].into();
    let same = root.clone();
    assert!(drift(&root, &same, Path::new("suites/x/Cargo.lock")).is_empty());

    let other: Versions = [
        ("tokio".to_owned(), BTreeSet::from(["1.40.0".to_owned()])),
        ("only-here".to_owned(), BTreeSet::from(["0.1.0".to_owned()])),
    ]
    .into();
    let lines = drift(&root, &other, Path::new("suites/x/Cargo.lock"));
    assert_eq!(
        lines,
        ["tokio: suites/x/Cargo.lock has 1.40.0, the root Cargo.lock has 1.54.1"]
    );
}

#[test]
fn a_subset_of_the_roots_versions_is_no_drift() {
    let root: Versions = [(
        "toml".to_owned(),
        BTreeSet::from(["0.9.12".to_owned(), "1.2.2".to_owned()]),
    )]
    .into();
    let one: Versions = [("toml".to_owned(), BTreeSet::from(["0.9.12".to_owned()]))].into();
    assert!(drift(&root, &one, Path::new("bench/Cargo.lock")).is_empty());
    let newer: Versions = [(
        "toml".to_owned(),
        BTreeSet::from(["0.9.12".to_owned(), "0.9.13".to_owned()]),
    )]
    .into();
    assert_eq!(
        drift(&root, &newer, Path::new("bench/Cargo.lock")),
        ["toml: bench/Cargo.lock has 0.9.12 and 0.9.13, the root Cargo.lock has 0.9.12 and 1.2.2"]
    );
}

#[test]
fn lockfiles_are_read_with_every_version_of_a_crate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("Cargo.lock");
    std::fs::write(
        &path,
        r#"version = 4

[[package]]
name = "toml"
version = "0.9.12"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "toml"
version = "1.2.2"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "testkit"
version = "0.1.0"
"#,
    )
    .unwrap();
    let versions = read_lock(&path);
    assert_eq!(versions.len(), 1, "path packages are skipped: {versions:?}");
    assert_eq!(join(&versions["toml"]), "0.9.12 and 1.2.2");
}

/// The `[profile]` table of the manifest beside `lock`, empty when it has
/// none.
fn profiles_beside(lock: &Path) -> toml::Table {
    let manifest = lock.with_file_name("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", manifest.display()));
    let doc: toml::Table = toml::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not valid TOML: {e}", manifest.display()));
    doc.get("profile")
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default()
}

/// Profiles are part of what makes a build of a crate the one another
/// workspace can reuse: every workspace that shares the target dir sets the
/// root's, and all but the root build testkit, a path dependency to them,
/// whole (`[profile.dev.package.testkit] incremental = false`, as a suite
/// that takes testkit from a registry gets it).
#[test]
fn every_workspace_has_the_root_manifests_profiles() {
    let root = repo_root();
    let ours = profiles_beside(&root.join("Cargo.lock"));
    assert!(
        !ours.is_empty(),
        "the root Cargo.toml sets no [profile]: this test compares nothing"
    );
    let expected = with_testkit_built_whole(ours);
    let mut problems = Vec::new();
    for lock in other_locks(&root) {
        let theirs = profiles_beside(&lock);
        if theirs != expected {
            let shown = lock.with_file_name("Cargo.toml");
            let shown = shown
                .strip_prefix(&root)
                .unwrap_or(&shown)
                .display()
                .to_string();
            let theirs = if theirs.is_empty() {
                "none".to_owned()
            } else {
                theirs.to_string()
            };
            problems.push(format!(
                "{shown}: its [profile] tables are\n{theirs}\n  they should be\n{expected}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "workspaces sharing the target dir build crates with other profiles, so the target \
         dir builds those crates twice:\n  {}\nCopy the root Cargo.toml's [profile] tables \
         into them, and add `incremental = false` for `testkit` and `testkit-engine` (see \
         bench/Cargo.toml for why).",
        problems.join("\n  ")
    );
}

/// The root's `[profile]` tables with testkit and its engine built whole, as every other
/// workspace sets them.
fn with_testkit_built_whole(mut profiles: toml::Table) -> toml::Table {
    let package = profiles
        .entry("dev")
        .or_insert_with(|| toml::Table::new().into())
        .as_table_mut()
        .expect("[profile.dev] is a table")
        .entry("package")
        .or_insert_with(|| toml::Table::new().into())
        .as_table_mut()
        .expect("[profile.dev.package] is a table");
    for crate_name in ["testkit", "testkit-engine"] {
        let mut whole = toml::Table::new();
        whole.insert("incremental".into(), false.into());
        package.insert(crate_name.into(), whole.into());
    }
    profiles
}
