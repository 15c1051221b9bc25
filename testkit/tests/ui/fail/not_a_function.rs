/// A struct.
#[testkit::test]
struct NotATest;

fn main() {}
