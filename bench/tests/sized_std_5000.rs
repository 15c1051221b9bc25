//! The 5000 tests of `sized_testkit_5000` as plain `#[test]`.

include!("sized/std.rs");

mods!(k1000; m0 m1 m2 m3 m4);
