// Trivial tests as plain `#[test]`: `include!` this, then a size from
// `sizes.rs`.

macro_rules! trivial {
    ($($name:ident)*) => {$(
        /// Does nothing.
        #[test]
        fn $name() {}
    )*};
}

include!("sizes.rs");
