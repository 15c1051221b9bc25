/// A colon instead of `=`.
#[testkit::test(timeout: "90s")]
async fn colon(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
