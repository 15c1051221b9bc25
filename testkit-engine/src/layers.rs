//! Keeps the layers of `lib.rs` honest: every module of this crate may use
//! only modules of a lower rank, and no file's imports lead back to it (see
//! `test_support::layers`).

use std::path::Path;

use test_support::layers::{check_circles, Layers};

/// Each top-level module with its rank; lower ranks know nothing of higher
/// ones. Add a new module here, at the lowest rank it can live at.
const LAYERS: Layers<'static> = Layers {
    ranks: &[
        // Facts that know nothing of tests.
        ("redact", 0),
        ("duration", 0),
        ("errors", 0),
        ("files", 1),
        ("ids", 0),
        ("json", 0),
        ("process", 1),
        ("settings", 1),
        ("install", 2),
        ("browser", 2),
        ("template", 1),
        ("trace", 1),
        ("history", 1),
        ("wait", 2),
        ("run", 2),
        ("machine", 2),
        ("config", 3),
        ("containers", 2),
        // Records, pods, resources.
        ("report", 3),
        ("pod", 4),
        ("resource", 5),
        ("lib", 10),
        ("layers", 10),
    ],
    reexports: &[("redact", 0), ("register_secret", 0), ("REDACTED", 0)],
};

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn imports_point_down_only() {
    LAYERS.check_ranks(&src());
}

/// No two files import each other, however far round.
#[test]
fn no_import_circles() {
    check_circles(&src());
}
