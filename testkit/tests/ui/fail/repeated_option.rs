/// Every option twice.
#[testkit::test(
    ignore = "a",
    ignore = "b",
    timeout = "1s",
    timeout = "2s",
    known_issue = "A-1",
    known_issue = "A-2",
    fails_with = "x",
    fails_with = "y",
    requires = ["exec"],
    requires = ["net"],
)]
async fn twice(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
