//! The 1000 tests of `sized_testkit_1000` as plain `#[test]`.

include!("sized/std.rs");

mods!(h100; m0 m1 m2 m3 m4 m5 m6 m7 m8 m9);
