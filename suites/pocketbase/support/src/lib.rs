//! Typed helpers for the PocketBase API, used by every test of the suite.
//!
//! - [`Collection`] is the kind `collection`: [`Collection::create`] names
//!   it from the run, gives it the [`NAME_FIELD`] text field, and creates it
//!   through `cx.create`. [`Collections`] is that kind in Rust, because
//!   PocketBase's routes of one collection answer from a cache that can
//!   disagree with its database (PB-2 in KNOWN-ISSUES.md).
//! - [`Record`] is the kind `record`, by the id PocketBase assigns:
//!   [`Record::create`] creates it through `cx.create_with_id`, with its
//!   name in [`NAME_FIELD`]. [`Records`] is that kind in Rust, because the
//!   id alone does not say which collection a record is in.
//! - Every request goes through `pod.send`, so a token that expires during
//!   the run is renewed; every non-2xx answer becomes an [`ApiError`], and
//!   [`expect_error`] checks that a call failed the documented way.
//!
//! The wire types are `serde_json::Value` on purpose: PocketBase answers
//! with JSON whose key order varies, and a test compares parsed values.

mod api;
mod collection;
mod record;

pub use api::{
    call, collection_in_database, expect_error, raw_request, reload_collection_cache, request,
    ApiError, Page,
};
pub use collection::{Collection, Collections};
pub use record::{Record, Records};
pub use testkit::template::encode;

/// The resource kind of collections, as declared in `testkit.toml`.
pub const COLLECTION: &str = "collection";

/// The resource kind of records, as declared in `testkit.toml`.
pub const RECORD: &str = "record";

/// The text field of every collection the suite creates that holds a
/// record's name, which carries the run id: how a listing finds residue.
pub const NAME_FIELD: &str = "tk_name";

// Every test binary of the suite uses this crate, so every one of them can
// sweep collections and records for the runner (a binary that does not use it links it not).
testkit::resource_kind!("collection", Collections);
testkit::resource_kind!("record", Records);

/// Polls `GET path` until it answers `status`. PocketBase's cache of
/// collections can disagree with its database (PB-2 in KNOWN-ISSUES.md):
/// it can lack a collection just created, which [`request`] mends, or keep
/// one just deleted, so that its GET answers 200 after a 204 delete. Each
/// poll that answers otherwise reloads the cache before the next.
pub async fn wait_status(cx: &testkit::Cx, path: &str, status: u16) -> anyhow::Result<()> {
    let pod = cx.pod()?;
    let wait = testkit::wait::Wait::new()
        .inactivity(std::time::Duration::from_secs(10))
        .ceiling(std::time::Duration::from_secs(30))
        .interval(std::time::Duration::from_millis(100));
    let what = format!("GET {path} to answer {status}");
    testkit::wait::until(cx, &what, wait, || async {
        let (now, _) = request(pod, reqwest::Method::GET, path, None).await?;
        if now == status {
            return Ok(testkit::wait::Check::Done(()));
        }
        api::reload_collection_cache(pod).await?;
        Ok(testkit::wait::Check::pending(format!(
            "answered {now}; reloaded the collection cache (PB-2)"
        )))
    })
    .await?;
    Ok(())
}

/// A PocketBase filter string literal: `'…'`, with `'` and `\` escaped.
pub fn quote(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "\\'"))
}
