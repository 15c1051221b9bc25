// Problems with the options, the signature and the doc comment are all
// reported together, not one per compile.

#[testkit::test(tiemout = "1s", ignore = "", fails_with = "x")]
fn everything_wrong(_a: u32, _b: u32) {}

fn main() {}
