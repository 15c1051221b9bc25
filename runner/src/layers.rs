//! Keeps the layers of `lib.rs` honest: every module of this crate may use
//! only modules of a lower rank, and no file's imports lead back to it (see
//! `test_support::layers`). `main.rs` is a crate of its own and not checked.

use std::path::Path;

use test_support::layers::{check_circles, Layers};

/// Each top-level module with its rank; lower ranks know nothing of higher
/// ones. Add a new module here, at the lowest rank it can live at.
const LAYERS: Layers<'static> = Layers {
    ranks: &[
        // Exit codes, the records of a run and what reads them.
        ("checkout", 0),
        ("exit", 0),
        ("killed", 0),
        ("rerun", 0),
        ("seal", 0),
        ("verdict", 0),
        ("errors", 1),
        ("runs", 1),
        ("summary", 1),
        ("junit", 2),
        ("ctrf", 2),
        ("timeline", 2),
        ("html", 3),
        // Container and machine pods, then the verbs that use them, then the command line.
        ("containers", 3),
        ("machines", 4),
        ("verbs", 5),
        ("args", 6),
        ("lib", 10),
        ("layers", 10),
    ],
    reexports: &[],
};

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn imports_point_down_only() {
    LAYERS.check(&src());
}

#[test]
fn no_import_circles() {
    check_circles(&src());
}
