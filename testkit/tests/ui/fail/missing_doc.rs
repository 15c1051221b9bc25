#[testkit::test]
async fn undocumented(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
