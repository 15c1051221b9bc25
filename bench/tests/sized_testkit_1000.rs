//! 1000 tests that return `Ok(())`, run by testkit's harness: under nextest,
//! one process per test. `sized_std_1000` is the same as plain `#[test]`.

include!("sized/testkit.rs");

mods!(h100; m0 m1 m2 m3 m4 m5 m6 m7 m8 m9);

testkit::main!();
