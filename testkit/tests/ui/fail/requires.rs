/// Not a list.
#[testkit::test(requires = "exec")]
async fn not_a_list(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// An empty list.
#[testkit::test(requires = [])]
async fn empty_list(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// Bad entries, all reported.
#[testkit::test(requires = ["exec", exec, "", "net", "exec"])]
async fn bad_entries(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
