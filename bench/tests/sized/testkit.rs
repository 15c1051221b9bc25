// Trivial tests under testkit's harness: `include!` this, then a size from
// `sizes.rs`, then `testkit::main!();`.

macro_rules! trivial {
    ($($name:ident)*) => {$(
        /// Does nothing.
        #[testkit::test]
        async fn $name(_cx: &mut testkit::Cx) -> testkit::Result {
            Ok(())
        }
    )*};
}

include!("sizes.rs");
