//! Keeps the layers of `lib.rs` honest: parse, then validate, then expand,
//! each using only what is below it, and no file's imports lead back to it
//! (see `test_support::layers`).

use test_support::layers::Layers;

/// Each top-level module with its rank; lower ranks know nothing of higher
/// ones. Add a new module here, at the lowest rank it can live at.
const LAYERS: Layers<'static> = Layers {
    ranks: &[
        ("error", 0),
        ("parse", 1),
        ("validate", 2),
        ("expand", 3),
        ("lib", 10),
        ("layers", 10),
    ],
    reexports: &[],
};

#[test]
fn imports_point_down_only() {
    LAYERS.check_crate(env!("CARGO_MANIFEST_DIR"));
}
