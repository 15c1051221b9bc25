//! Records: server-assigned ids, get, filters, sorting and pages, delete, and
//! validation.

use pocketbase_support::{expect_error, quote, Collection, Record};
use serde_json::json;
use testkit::prelude::*;

/// PocketBase assigns every record a 15-character id of `[a-z0-9]`, and the
/// record is found by it with the fields it was created with.
#[testkit::test(requires = ["records"])]
async fn server_assigns_15_char_ids(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let c = Collection::create(cx, &["title"]).await?;
    let a = Record::create(cx, &c, json!({"title": "first"})).await?;
    let b = Record::create(cx, &c, json!({"title": "second"})).await?;
    for r in [&a, &b] {
        let id = r.id();
        ensure!(
            id.len() == 15
                && id
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
            "expected an id of 15 characters of [a-z0-9], got {id:?}"
        );
    }
    ensure!(a.id() != b.id(), "two records got the same id {}", a.id());
    let got = Record::get(pod, c.name(), a.id()).await?;
    ensure!(
        got["title"] == json!("first") && got["tk_name"] == json!(a.name()),
        "GET of record {} answered {got}",
        a.id()
    );
    Ok(())
}

/// A filter on a text field lists exactly the records that match, and a
/// filter that matches nothing lists none, with 200.
#[testkit::test(requires = ["records"])]
async fn filter_by_field(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let c = Collection::create(cx, &["color"]).await?;
    let mut red = Vec::new();
    for color in ["red", "blue", "red"] {
        let r = Record::create(cx, &c, json!({"color": color})).await?;
        if color == "red" {
            red.push(r.id().to_owned());
        }
    }
    red.sort();
    let page = Record::list(pod, c.name(), "color='red'", "id", 1, 30).await?;
    ensure!(
        page.strings("id") == red,
        "color='red' listed {:?}, expected {red:?}",
        page.strings("id")
    );
    let none = Record::list(pod, c.name(), "color='green'", "", 1, 30).await?;
    ensure!(
        none.items.is_empty() && none.total_items == 0,
        "color='green' listed {:?}",
        none.strings("id")
    );
    Ok(())
}

/// A value with a quote matches once the quote is escaped as `\'`.
#[testkit::test(requires = ["records"])]
async fn filter_value_with_quote(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let c = Collection::create(cx, &["owner"]).await?;
    let r = Record::create(cx, &c, json!({"owner": "O'Brien"})).await?;
    Record::create(cx, &c, json!({"owner": "OBrien"})).await?;
    let page = Record::list(
        pod,
        c.name(),
        &format!("owner={}", quote("O'Brien")),
        "",
        1,
        30,
    )
    .await?;
    ensure!(
        page.strings("id") == [r.id()],
        "owner='O\\'Brien' listed {:?}, expected [{}]",
        page.strings("id"),
        r.id()
    );
    Ok(())
}

/// Records sorted by a field come in pages of the size asked for, with
/// totals that agree, and the pages together hold every record once.
#[testkit::test(requires = ["records"])]
async fn pagination_sorted(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let c = Collection::create(cx, &["rank"]).await?;
    // Created out of order: the listing's order is the sort's, not insertion's.
    for rank in ["c", "a", "e", "b", "d"] {
        Record::create(cx, &c, json!({"rank": rank})).await?;
    }
    let mut ranks = Vec::new();
    for page in 1..=3 {
        let p = Record::list(pod, c.name(), "", "rank", page, 2).await?;
        ensure!(
            (p.total_items, p.total_pages) == (5, 3),
            "page {page}: expected 5 records on 3 pages, got {} on {}",
            p.total_items,
            p.total_pages
        );
        ranks.extend(p.strings("rank"));
    }
    ensure!(
        ranks == ["a", "b", "c", "d", "e"],
        "pages of 2 sorted by rank gave {ranks:?}"
    );
    let desc = Record::list(pod, c.name(), "", "-rank", 1, 1).await?;
    ensure!(
        desc.strings("rank") == ["e"],
        "sort=-rank started with {:?}",
        desc.strings("rank")
    );
    Ok(())
}

/// A deleted record answers 404, and so does deleting it again.
#[testkit::test(requires = ["records"])]
async fn delete_record(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let c = Collection::create(cx, &[]).await?;
    let r = Record::create(cx, &c, json!({})).await?;
    let keep = Record::create(cx, &c, json!({})).await?;
    let id = r.id().to_owned();
    r.delete(cx).await?;
    let path = format!("/api/collections/{}/records/{id}", c.name());
    expect_error(
        pocketbase_support::call(pod, reqwest::Method::DELETE, &path, None).await,
        404,
        None,
    )?;
    // The other record is untouched.
    Record::get(pod, c.name(), keep.id())
        .await
        .context("the record that was not deleted")?;
    Ok(())
}

/// A record without a required field is refused with 400 and a
/// `validation_required` error on that field.
#[testkit::test(requires = ["records"])]
async fn missing_required_field_refused(cx: &mut Cx) -> testkit::Result {
    let c = Collection::create_with(
        cx,
        vec![json!({"name": "title", "type": "text", "required": true})],
    )
    .await?;
    // Tracked like any record, in case PocketBase takes it after all.
    let result = Record::create(cx, &c, json!({"note": "no title"})).await;
    expect_error(result, 400, Some(("title", "validation_required")))?;
    Ok(())
}

testkit::main!();
