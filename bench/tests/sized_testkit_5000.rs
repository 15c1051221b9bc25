//! 5000 tests that return `Ok(())`, run by testkit's harness: under nextest,
//! one process per test. `sized_std_5000` is the same as plain `#[test]`.

include!("sized/testkit.rs");

mods!(k1000; m0 m1 m2 m3 m4);

testkit::main!();
