/// `intermittent` without `known_issue`.
#[testkit::test(intermittent = true)]
async fn alone(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// `intermittent` without `fails_with`: any failure would be excused.
#[testkit::test(known_issue = "SBX-7", intermittent = true)]
async fn any_failure(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

/// `intermittent` takes a boolean.
#[testkit::test(known_issue = "SBX-7", fails_with = "lost", intermittent = "yes")]
async fn not_a_bool(cx: &mut testkit::Cx) -> testkit::Result {
    let _ = cx;
    Ok(())
}

fn main() {}
