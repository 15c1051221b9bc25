/// Not async.
#[testkit::test]
fn blocking(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
