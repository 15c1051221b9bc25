// Test suites of a given size without thousands of hand-written names: each
// size is nested modules of ten tests (`m3::m7::t2`), from one macro,
// `trivial!`, that the including file defines for its harness.

macro_rules! t10 {
    () => {
        trivial!(t0 t1 t2 t3 t4 t5 t6 t7 t8 t9);
    };
}

macro_rules! mods {
    ($inner:ident; $($m:ident)*) => {$(
        mod $m {
            $inner!();
        }
    )*};
}

#[allow(unused_macros)]
macro_rules! h100 {
    () => {
        mods!(t10; m0 m1 m2 m3 m4 m5 m6 m7 m8 m9);
    };
}

#[allow(unused_macros)]
macro_rules! k1000 {
    () => {
        mods!(h100; m0 m1 m2 m3 m4 m5 m6 m7 m8 m9);
    };
}
