//! Keeps the layers of `lib.rs` honest: every module of this crate may use
//! only modules of a lower rank (see `test_support::layers`).

use test_support::layers::Layers;

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
        ("process", 1),
        ("settings", 1),
        ("install", 2),
        ("template", 1),
        ("trace", 1),
        ("wait", 2),
        ("run", 2),
        ("config", 2),
        // Records, pods, resources.
        ("report", 3),
        ("pod", 4),
        ("resource", 5),
        ("lib", 10),
        ("layers", 10),
    ],
    reexports: &[("redact", 0), ("register_secret", 0), ("REDACTED", 0)],
};

#[test]
fn imports_point_down_only() {
    LAYERS.check(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}
