#[doc = concat!("Verifies ", "something.")]
#[testkit::test]
async fn computed_doc(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
