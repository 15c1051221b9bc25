//! Collections, the kind `collection`: named by the run, created through
//! `cx.create`, deleted and verified gone when the test ends.

use reqwest::Method;
use serde_json::{json, Value};
use testkit::pod::Pod;
use testkit::Cx;

use crate::api::{call, Page};
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
