//! Listing: pages of `limit`, sorted by name, filtered by prefix and labels,
//! and refusing malformed queries.

use std::collections::BTreeSet;
use std::time::Duration;

use conformance_support::{expect_error, ListQuery, Sandbox, SandboxSpec};
use testkit::prelude::*;

/// Creates `n` sandboxes labelled `owner=<a name of this test>` (plus
/// `extra(i)`), and returns their names, sorted, and the owner value.
async fn create_owned(
    cx: &Cx,
    n: usize,
    extra: impl Fn(usize) -> Option<(&'static str, &'static str)>,
) -> testkit::Result<(Vec<String>, String)> {
    // A name of this test that is never created: unique to the test and run.
    let owner = cx.unique_name();
    let mut names = Vec::new();
    for i in 0..n {
        let mut spec = SandboxSpec::new().label("owner", owner.as_str());
        if let Some((k, v)) = extra(i) {
            spec = spec.label(k, v);
        }
        names.push(Sandbox::create(cx, spec).await?.name().to_owned());
    }
    names.sort();
    Ok((names, owner))
}

/// The common prefix of the names one test creates: `<prefix>-<run>-<tag>-`.
fn test_prefix(name: &str) -> &str {
    &name[..=name.rfind('-').expect("names end in -NN")]
}

/// A listing with a limit comes in full pages, then a last page with no
/// next token; together they hold each sandbox exactly once.
#[testkit::test]
async fn pages_hold_every_sandbox_once(cx: &mut Cx) -> testkit::Result {
    let (names, owner) = create_owned(cx, 5, |_| None).await?;
    let pages = Sandbox::list_pages(cx, &ListQuery::new().label("owner", &owner).limit(2)).await?;
    let sizes: Vec<usize> = pages.iter().map(|p| p.items.len()).collect();
    ensure!(
        sizes == [2, 2, 1],
        "expected pages of 2, 2 and 1, got {sizes:?}"
    );
    ensure!(
        pages.last().is_some_and(|p| p.next_page_token.is_none()),
        "the last page has a next_page_token"
    );
    let listed: Vec<String> = pages.iter().flat_map(|p| p.names()).collect();
    ensure!(listed == names, "listed {listed:?}, created {names:?}");
    Ok(())
}

/// A listing is sorted by name, across pages.
#[testkit::test]
async fn listing_is_sorted_by_name(cx: &mut Cx) -> testkit::Result {
    let (_, owner) = create_owned(cx, 4, |_| None).await?;
    let listed = Sandbox::list_names(cx, &ListQuery::new().label("owner", &owner).limit(3)).await?;
    let mut sorted = listed.clone();
    sorted.sort();
    ensure!(listed == sorted, "not sorted by name: {listed:?}");
    Ok(())
}

/// A page exactly as long as what is left has no next token.
#[testkit::test]
async fn an_exact_last_page_has_no_next_token(cx: &mut Cx) -> testkit::Result {
    let (names, owner) = create_owned(cx, 2, |_| None).await?;
    let page = Sandbox::list(cx, &ListQuery::new().label("owner", &owner).limit(2)).await?;
    ensure!(
        page.names() == names,
        "listed {:?}, created {names:?}",
        page.names()
    );
    ensure!(
        page.next_page_token.is_none(),
        "a complete page has next_page_token {:?}",
        page.next_page_token
    );
    Ok(())
}

/// `prefix=` lists exactly the sandboxes whose names start with it.
#[testkit::test]
async fn prefix_filters_by_name(cx: &mut Cx) -> testkit::Result {
    let (names, _) = create_owned(cx, 3, |_| None).await?;
    let prefix = test_prefix(&names[0]);
    let listed = Sandbox::list_names(cx, &ListQuery::new().prefix(prefix)).await?;
    ensure!(
        listed == names,
        "prefix {prefix} listed {listed:?}, created {names:?}"
    );
    let one = Sandbox::list_names(cx, &ListQuery::new().prefix(&names[1])).await?;
    ensure!(
        one == [names[1].clone()],
        "prefix {} listed {one:?}",
        names[1]
    );
    Ok(())
}

/// `label=k=v` lists exactly the sandboxes with that label; several label
/// filters must all match.
#[testkit::test]
async fn labels_filter_the_listing(cx: &mut Cx) -> testkit::Result {
    let (names, owner) = create_owned(cx, 3, |i| {
        Some(("color", if i < 2 { "red" } else { "blue" }))
    })
    .await?;
    let red = Sandbox::list_names(
        cx,
        &ListQuery::new()
            .label("owner", &owner)
            .label("color", "red"),
    )
    .await?;
    let blue = Sandbox::list_names(
        cx,
        &ListQuery::new()
            .label("owner", &owner)
            .label("color", "blue"),
    )
    .await?;
    ensure!(
        red.len() == 2 && blue.len() == 1,
        "red: {red:?}, blue: {blue:?}"
    );
    let all: BTreeSet<&String> = red.iter().chain(&blue).collect();
    ensure!(
        all == names.iter().collect(),
        "red and blue {all:?} are not the created {names:?}"
    );
    let none = Sandbox::list_names(
        cx,
        &ListQuery::new()
            .label("owner", &owner)
            .label("color", "green"),
    )
    .await?;
    ensure!(none.is_empty(), "color=green listed {none:?}");
    Ok(())
}

/// A listing that matches nothing is one empty page without a next token.
#[testkit::test]
async fn an_empty_listing_is_one_empty_page(cx: &mut Cx) -> testkit::Result {
    let page = Sandbox::list(cx, &ListQuery::new().prefix(cx.unique_name()).limit(5)).await?;
    ensure!(
        page.items.is_empty() && page.next_page_token.is_none(),
        "unexpected page: {page:?}"
    );
    Ok(())
}

/// Labels and env set at creation are listed as they were given.
#[testkit::test]
async fn listing_shows_labels_and_env(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(
        cx,
        SandboxSpec::new()
            .label("app.kubernetes.io/name", "x")
            .env("K", "v"),
    )
    .await?;
    let page = Sandbox::list(cx, &ListQuery::new().prefix(sb.name())).await?;
    ensure!(
        page.items == [sb.info().clone()],
        "listed {:?}, created {:?}",
        page.items,
        sb.info()
    );
    Ok(())
}

/// Malformed queries are refused with 400 `bad_request`: a limit of 0 or
/// not a number, a made-up page token, a label filter without `=`, an
/// unknown parameter.
#[testkit::test]
async fn malformed_queries_are_refused(cx: &mut Cx) -> testkit::Result {
    for query in [
        "limit=0",
        "limit=ten",
        "limit=1001",
        "page_token=zz",
        "label=novalue",
        "colour=red",
    ] {
        let path = format!("/api/sandboxes?{query}");
        let (status, body) = conformance_support::request(
            cx,
            reqwest::Method::GET,
            &path,
            conformance_support::Body::Empty,
            Duration::from_secs(30),
        )
        .await?;
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        ensure!(
            status == 400 && body["error"]["code"] == "bad_request",
            "`{query}` answered {status}: {body}"
        );
    }
    Ok(())
}

/// Invalid labels are refused at creation with 400 `bad_request`.
#[testkit::test]
async fn invalid_labels_are_refused(cx: &mut Cx) -> testkit::Result {
    for (k, v) in [("", "empty-key"), ("-leading", "x"), ("k", "has=equals")] {
        let name = cx.unique_name();
        let result = Sandbox::create_named(cx, &name, SandboxSpec::new().label(k, v)).await;
        expect_error(result.map(|s| s.name().to_owned()), 400, "bad_request")
            .with_context(|| format!("label {k:?}={v:?}"))?;
    }
    Ok(())
}

testkit::main!();
