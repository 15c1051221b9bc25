//! A Python with one pinned PyPI package, for the tests that check what
//! testkit writes with the reader other tools use (junitparser for JUnit,
//! jsonschema for CTRF): a venv under the target dir, made from PyPI where
//! it is missing (saying so), unless `TESTKIT_INSTALL=never`, which fails
//! naming the command. A reader that is never run checks nothing, so it is
//! never skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `python3` of a venv `<target dir>/<venv>` that imports `module`
/// from `package` (`name==version`), made if needed.
pub fn python_with(venv: &str, package: &str, module: &str) -> PathBuf {
    let venv = crate::target_dir().join(venv);
    let python = venv.join("bin/python3");
    let ready = |python: &Path| {
        Command::new(python)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ready(&python) {
        return python;
    }
    let install = format!(
        "python3 -m venv {dir} && {dir}/bin/pip install {package}",
        dir = venv.display()
    );
    assert!(
        std::env::var("TESTKIT_INSTALL").as_deref() != Ok("never"),
        "{module} is not installed and TESTKIT_INSTALL=never: run `{install}`"
    );
    eprintln!("note: installing {package}: {install}");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", package])
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        made && ready(&python),
        "could not install {package}: run `{install}`"
    );
    python
}
