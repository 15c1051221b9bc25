/// `fails_with` without `known_issue`.
#[testkit::test(fails_with = "connection refused")]
async fn alone(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
