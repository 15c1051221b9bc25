/// Empty values.
#[testkit::test(ignore = "", known_issue = " ", fails_with = "")]
async fn empty(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
