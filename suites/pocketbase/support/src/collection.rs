//! Collections, the kind `collection`: named by the run, created through
//! `cx.create`, deleted and verified gone when the test ends. The kind is
//! Rust ([`Collections`]) because of PB-2 (KNOWN-ISSUES.md): PocketBase's
//! routes of one collection answer from a cache that can lack it or keep
//! it after its delete, so the kind asks the database whether a collection
//! exists and mends the cache when its delete answers 404 from it.

use reqwest::Method;
use serde_json::{json, Value};
use testkit::pod::Pod;
use testkit::resource::{KindFuture, OpError, Presence, ResourceKind, ResourceRef};
use testkit::Cx;

use crate::api::{call, collection_in_database, delete, op, Page};
use crate::{encode, quote, COLLECTION, NAME_FIELD};

/// A base collection this test created.
#[derive(Debug, Clone)]
pub struct Collection {
    name: String,
    info: Value,
}

impl Collection {
    /// Creates a base collection with a name of the run, the [`NAME_FIELD`]
    /// text field and a text field for each of `fields`. Superuser-only
    /// (every rule `null`).
    pub async fn create(cx: &Cx, fields: &[&str]) -> anyhow::Result<Collection> {
        let fields = fields
            .iter()
            .map(|f| json!({"name": f, "type": "text"}))
            .collect();
        Collection::create_with(cx, fields).await
    }

    /// [`Collection::create`] with fields as PocketBase takes them
    /// (`{"name", "type", "required", …}`), after [`NAME_FIELD`].
    pub async fn create_with(cx: &Cx, fields: Vec<Value>) -> anyhow::Result<Collection> {
        let pod = cx.pod()?;
        let name = cx.unique_name_for(COLLECTION)?;
        let mut all = vec![json!({"name": NAME_FIELD, "type": "text"})];
        all.extend(fields);
        let body = json!({"name": name, "type": "base", "fields": all});
        let info = cx
            .create(COLLECTION, &name, async {
                call(pod, Method::POST, "/api/collections", Some(&body)).await
            })
            .await?;
        let records = format!("/api/collections/{}/records?perPage=1", encode(&name));
        crate::wait_status(cx, &records, 200).await?;
        Ok(Collection { name, info })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its id (`pbc_…`).
    pub fn id(&self) -> &str {
        self.info.get("id").and_then(Value::as_str).unwrap_or("")
    }

    /// What the create answered.
    pub fn info(&self) -> &Value {
        &self.info
    }

    /// `GET /api/collections/{name}`.
    pub async fn get(pod: &Pod, name: &str) -> anyhow::Result<Value> {
        call(
            pod,
            Method::GET,
            &format!("/api/collections/{}", encode(name)),
            None,
        )
        .await
    }

    /// `GET /api/collections` with `filter`, page `page`, `per_page` a page.
    pub async fn list(pod: &Pod, filter: &str, page: u64, per_page: u64) -> anyhow::Result<Page> {
        let path = format!(
            "/api/collections?filter={}&page={page}&perPage={per_page}&sort=name",
            encode(filter)
        );
        Page::parse(&call(pod, Method::GET, &path, None).await?, &path)
    }

    /// The filter of the collection named exactly `name`.
    pub fn filter_named(name: &str) -> String {
        format!("(name={})", quote(name))
    }

    /// Deletes it, checks that it is gone and stops tracking it.
    pub async fn delete(self, cx: &Cx) -> anyhow::Result<()> {
        let pod = cx.pod()?;
        let path = format!("/api/collections/{}", encode(&self.name));
        call(pod, Method::DELETE, &path, None).await?;
        crate::wait_status(cx, &path, 404).await?;
        cx.forget(COLLECTION, &self.name);
        Ok(())
    }
}

/// The kind `collection` (`[resources.collection] rust = true`): what the
/// test process, its reaper and the runner's residue sweep use to delete,
/// check and find collections.
#[derive(Debug, Clone, Copy, Default)]
pub struct Collections;

impl ResourceKind for Collections {
    fn delete<'a>(&'a self, pod: &'a Pod, r: &'a ResourceRef) -> KindFuture<'a, ()> {
        Box::pin(async move {
            // `request` sends a 404 from a cache that lacks the collection
            // again once the cache is reloaded: a 404 here is the database's.
            let path = format!("/api/collections/{}", encode(&r.name));
            delete(pod, &path).await
        })
    }

    fn exists<'a>(&'a self, pod: &'a Pod, r: &'a ResourceRef) -> KindFuture<'a, Presence> {
        Box::pin(async move {
            Ok(if op(collection_in_database(pod, &r.name).await)? {
                Presence::Present("listed in the database".to_owned())
            } else {
                Presence::Gone
            })
        })
    }

    fn list<'a>(&'a self, pod: &'a Pod, prefix: &'a str) -> KindFuture<'a, Vec<ResourceRef>> {
        Box::pin(async move {
            // `~` without `%` is a literal "contains"; the listing is the
            // database's, and only names that start with the prefix count.
            let path = format!(
                "/api/collections?filter={}&perPage=1000&fields=name",
                encode(&format!("name~{}", quote(prefix)))
            );
            let listing = op(call(pod, Method::GET, &path, None).await)?;
            let page = op(Page::parse(&listing, &path))?;
            if page.total_items > page.items.len() as i64 {
                return Err(OpError::Permanent(format!(
                    "GET {path} lists {} of {} collections: more than one page",
                    page.items.len(),
                    page.total_items
                )));
            }
            Ok(page
                .items
                .iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .filter(|n| n.starts_with(prefix))
                .map(ResourceRef::named)
                .collect())
        })
    }
}
