//! Keeps the layers of `lib.rs` honest: every module of this crate may use
//! only modules of a lower rank, and no file's imports lead back to it (see
//! `test_support::layers`).

use test_support::layers::Layers;

/// Each top-level module with its rank; lower ranks know nothing of higher
/// ones. Add a new module here, at the lowest rank it can live at.
const LAYERS: Layers<'static> = Layers {
    ranks: &[
        // The wire types and what reads `/proc`.
        ("api", 0),
        ("proc_table", 0),
        ("error", 1),
        ("config", 1),
        ("ctl", 1),
        ("owner", 1),
        // The state in HOME and the sandbox processes.
        ("state", 2),
        ("procs", 3),
        ("listing", 3),
        // What both roles serve alike, then the two roles, which know
        // nothing of each other.
        ("skeleton", 4),
        ("server", 5),
        ("gateway", 5),
        ("lib", 10),
        ("layers", 10),
    ],
    reexports: &[],
};

#[test]
fn imports_point_down_only() {
    LAYERS.check_crate(env!("CARGO_MANIFEST_DIR"));
}
