//! 250 tests that return `Ok(())`, run by testkit's harness: under nextest,
//! one process per test. `sized_std_250` is the same as plain `#[test]`.

include!("sized/testkit.rs");

mods!(t10; m00 m01 m02 m03 m04 m05 m06 m07 m08 m09 m10 m11 m12 m13 m14 m15 m16 m17 m18 m19 m20 m21 m22 m23 m24);

testkit::main!();
