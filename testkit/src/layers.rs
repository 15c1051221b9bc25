//! Keeps the layers of `lib.rs` honest: every module of this crate may use
//! only modules of a lower rank, and no file's imports lead back to it (see
//! `test_support::layers`).

use test_support::layers::Layers;

/// Each top-level module with its rank; lower ranks know nothing of higher
/// ones. Add a new module here, at the lowest rank it can live at.
const LAYERS: Layers<'static> = Layers {
    ranks: &[
        // Facts that know nothing of tests (the engine, `crate::engine`, is
        // below them all).
        ("skip", 0),
        ("runtime", 0),
        ("log", 1),
        ("leftovers", 1),
        // What a test process reads once, and the record files it writes.
        ("globals", 2),
        // What a test owns: its reaper, its resources, its CLI runs, its
        // browsers; the roles a test binary runs in besides its tests.
        ("reaper", 3),
        ("sweeper", 3),
        ("tracker", 4),
        ("signals", 5),
        // The steps of a test's trace, cleanup's summary among them.
        ("trace", 5),
        ("cli", 5),
        ("faults", 5),
        ("browser", 6),
        // What a test sees.
        ("cx", 7),
        // The harness on top; the facade and generated code's re-exports above it.
        ("harness", 8),
        ("__private", 9),
        ("lib", 10),
        ("layers", 10),
    ],
    // Items the crate root re-exports, named by the module that owns them.
    reexports: &[
        ("engine", 0),
        ("Result", 0),
        ("bail", 0),
        ("ensure", 0),
        ("format_err", 0),
        ("Context", 0),
        ("redact", 0),
        ("register_secret", 0),
        ("REDACTED", 0),
        ("Skip", 0),
        ("wait", 0),
        ("template", 0),
        ("pod", 0),
        ("resource", 0),
        ("history", 0),
        ("resource_kind", 2),
        ("Cx", 7),
        ("CliCommand", 5),
        ("CliOutput", 5),
        ("Faults", 5),
    ],
};

#[test]
fn imports_point_down_only() {
    LAYERS.check_crate(env!("CARGO_MANIFEST_DIR"));
}
