//! Collections: create, get, list, filter, paginate, delete, and the names
//! PocketBase refuses.

use futures_util::future::join_all;
use pocketbase_support::{
    call, collection_in_database, expect_error, raw_request, reload_collection_cache, Collection,
    COLLECTION, NAME_FIELD,
};
use reqwest::Method;
use serde_json::{json, Value};
use testkit::prelude::*;

/// A created collection is a base collection with the fields asked for, is
/// found by its name, and is gone (404) after delete.
#[testkit::test(requires = ["collections"])]
async fn create_get_delete(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let c = Collection::create(cx, &["title"]).await?;
    ensure!(
        c.id().starts_with("pbc_"),
        "expected a collection id like pbc_…, got {:?}",
        c.id()
    );
    let got = Collection::get(pod, c.name()).await?;
    ensure!(
        got["id"] == json!(c.id()) && got["type"] == json!("base"),
        "GET {} answered another collection: {got}",
        c.name()
    );
    let fields: Vec<&str> = got["fields"]
        .as_array()
        .map(|f| f.iter().filter_map(|f| f["name"].as_str()).collect())
        .unwrap_or_default();
    ensure!(
        fields == ["id", NAME_FIELD, "title"],
        "expected the fields id, {NAME_FIELD}, title, got {fields:?}"
    );
    let name = c.name().to_owned();
    c.delete(cx).await?;
    expect_error(Collection::get(pod, &name).await, 404, None)?;
    Ok(())
}

/// An exact name filter lists the one collection of that name and no other.
#[testkit::test(requires = ["collections"])]
async fn exact_name_filter(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let a = Collection::create(cx, &[]).await?;
    let b = Collection::create(cx, &[]).await?;
    let page = Collection::list(pod, &Collection::filter_named(a.name()), 1, 30).await?;
    ensure!(
        page.strings("name") == [a.name()] && page.total_items == 1,
        "filtering by the name {} listed {:?} ({} in all)",
        a.name(),
        page.strings("name"),
        page.total_items
    );
    ensure!(
        !page.strings("name").contains(&b.name().to_owned()),
        "{} was listed under the name of {}",
        b.name(),
        a.name()
    );
    Ok(())
}

/// Listing pages through the test's collections: 2 a page, then the rest,
/// then an empty page past the end, with totals that agree.
#[testkit::test(requires = ["collections"])]
async fn pagination(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let mut names = Vec::new();
    for _ in 0..3 {
        names.push(Collection::create(cx, &[]).await?.name().to_owned());
    }
    // The test's names share everything up to the counter: `pb_<run>_<tag>_`.
    let stem = &names[0][..names[0].rfind('_').unwrap_or(0) + 1];
    let filter = format!("name~'{stem}'");
    let first = Collection::list(pod, &filter, 1, 2).await?;
    let second = Collection::list(pod, &filter, 2, 2).await?;
    let third = Collection::list(pod, &filter, 3, 2).await?;
    ensure!(
        (first.total_items, first.total_pages, first.per_page) == (3, 2, 2),
        "expected 3 collections on 2 pages of 2, got totalItems {} totalPages {} perPage {}",
        first.total_items,
        first.total_pages,
        first.per_page
    );
    let mut listed = first.strings("name");
    listed.extend(second.strings("name"));
    ensure!(
        listed == names,
        "pages 1 and 2 sorted by name listed {listed:?}, expected {names:?}"
    );
    ensure!(
        third.items.is_empty() && third.page == 3,
        "page 3 of 2 should be empty, got {:?}",
        third.strings("name")
    );
    Ok(())
}

/// A name with `-` is refused with 400 and a field error on `name`: names
/// must match `^\w+$` (which is why the kind's names join with `_`).
#[testkit::test(requires = ["collections"])]
async fn dash_in_name_refused(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let name = cx.unique_name_for(COLLECTION)?.replace('_', "-");
    let body = json!({"name": name, "type": "base"});
    let result = call(pod, Method::POST, "/api/collections", Some(&body)).await;
    if result.is_ok() {
        // Not tracked (its name fits no kind): remove it before failing.
        let _ = call(
            pod,
            Method::DELETE,
            &format!("/api/collections/{name}"),
            None,
        )
        .await;
    }
    expect_error(result, 400, Some(("name", "validation_match_invalid")))?;
    Ok(())
}

/// Collection names are unique regardless of case: the upper-case name of an
/// existing collection is refused with 400 `validation_collection_name_exists`.
#[testkit::test(requires = ["collections"])]
async fn duplicate_name_refused_whatever_the_case(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let c = Collection::create(cx, &[]).await?;
    let upper = c.name().to_uppercase();
    let body = json!({"name": upper, "type": "base"});
    let result = call(pod, Method::POST, "/api/collections", Some(&body)).await;
    if let Ok(created) = &result {
        // A second collection the tracker does not know: remove it first.
        if let Some(id) = created.get("id").and_then(Value::as_str) {
            let _ = call(pod, Method::DELETE, &format!("/api/collections/{id}"), None).await;
        }
    }
    expect_error(
        result,
        400,
        Some(("name", "validation_collection_name_exists")),
    )?;
    Ok(())
}

/// Deleting a collection that does not exist answers 404.
#[testkit::test(requires = ["collections"])]
async fn delete_missing_is_404(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    // A name of the run that was never created.
    let name = cx.unique_name_for(COLLECTION)?;
    let path = format!("/api/collections/{name}");
    expect_error(call(pod, Method::DELETE, &path, None).await, 404, None)?;
    Ok(())
}

/// Changes of collections made at once leave PocketBase's cache of
/// collections as its database is: a collection that exists answers its
/// records route, and one that was deleted answers 404. PocketBase reloads
/// the cache after every change by reading all collections and then storing
/// the list, unsynchronized: a reload that read before another change
/// committed can store its list after that change's own (PB-2). Beside 16
/// collections that make each reload's read longer, each round creates six
/// collections while deleting the six of the round before, then asks each
/// route as it answers, without the suite's mending.
#[testkit::test(
    requires = ["collections"],
    exclusive,
    known_issue = "PB-2",
    intermittent = true,
    fails_with = "PB-2:"
)]
async fn concurrent_changes_keep_the_cache_of_collections(cx: &mut Cx) -> testkit::Result {
    const ROUNDS: usize = 20;
    const WIDTH: usize = 6;
    // Within the kind's budget of 32 with two rounds of six.
    const BALLAST: usize = 16;
    let pod = cx.pod()?;
    // Every reload reads every collection: more of them, a longer read,
    // a wider window for the race.
    for _ in 0..BALLAST {
        Collection::create(cx, &["a", "b", "c", "d"]).await?;
    }
    let mut previous: Vec<String> = Vec::new();
    let mut found = Ok(());
    for round in 1..=ROUNDS {
        let names = (0..WIDTH)
            .map(|_| cx.unique_name_for(COLLECTION))
            .collect::<Result<Vec<_>, _>>()?;
        let gone = std::mem::take(&mut previous);
        let (created, deletes) = tokio::join!(
            join_all(names.iter().map(|n| create_bare(cx, n))),
            join_all(gone.iter().map(|n| delete_bare(cx, n))),
        );
        created.into_iter().collect::<testkit::Result<Vec<()>>>()?;
        // A delete that the cache answered 404 for a collection still in the
        // database is PB-2 too; that collection stays tracked, and the
        // cleanup (whose kind asks the database) deletes it.
        let mut deleted = Vec::new();
        for (name, delete) in gone.iter().zip(deletes) {
            match delete? {
                Ok(()) => deleted.push(name),
                Err(seen) if found.is_ok() => {
                    found = Err(format_err!("PB-2: round {round}: {seen}"))
                }
                Err(_) => {}
            }
        }
        for name in &names {
            let path = format!("/api/collections/{name}/records?perPage=1");
            let (status, body) = raw_request(pod, Method::GET, &path, None).await?;
            if status != 200 && found.is_ok() && collection_in_database(pod, name).await? {
                found = Err(format_err!(
                    "PB-2: round {round}: collection {name} is in the database, but GET {path} answered {status} {body}"
                ));
            }
        }
        for name in deleted {
            let path = format!("/api/collections/{name}");
            let (status, _) = raw_request(pod, Method::GET, &path, None).await?;
            if status != 404 && found.is_ok() && !collection_in_database(pod, name).await? {
                found = Err(format_err!(
                    "PB-2: round {round}: collection {name} was deleted (204) and is not in the database, but GET {path} answered {status}"
                ));
            }
        }
        previous = names;
    }
    // Whatever the rounds left in the cache, the tests after this one (it
    // has the pod to itself) find it as the database is.
    reload_collection_cache(pod).await?;
    Ok(found?)
}

/// Creates collection `name` with no fields, tracked, and nothing more: no
/// waiting for its records route, as `Collection::create` does.
async fn create_bare(cx: &Cx, name: &str) -> testkit::Result {
    let pod = cx.pod()?;
    let body = json!({"name": name, "type": "base"});
    cx.create(COLLECTION, name, async {
        call(pod, Method::POST, "/api/collections", Some(&body)).await
    })
    .await?;
    Ok(())
}

/// Deletes collection `name` with one request, and stops
/// tracking it once its delete answered 204. `Ok(Err(what))`: the delete
/// answered 404 while the collection is in the database (PB-2); it stays
/// tracked.
async fn delete_bare(cx: &Cx, name: &str) -> testkit::Result<Result<(), String>> {
    let pod = cx.pod()?;
    let path = format!("/api/collections/{name}");
    let (status, body) = raw_request(pod, Method::DELETE, &path, None).await?;
    if status == 404 && collection_in_database(pod, name).await? {
        return Ok(Err(format!(
            "collection {name} is in the database, but DELETE {path} answered 404 {body}"
        )));
    }
    ensure!(
        status == 204,
        "DELETE {path} answered {status} {body}, expected 204"
    );
    cx.forget(COLLECTION, name);
    Ok(Ok(()))
}

testkit::main!();
