/// No body.
#[testkit::test]
async fn declared(cx: &mut testkit::Cx) -> testkit::Result;

fn main() {}
