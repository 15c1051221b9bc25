//! Records, the kind `record`: PocketBase assigns their ids, and a record
//! lives in a collection, which its id alone does not name. So the kind is
//! Rust ([`Records`]): a record's testkit id is `<collection>/<record id>`,
//! its name (which carries the run id) is its [`NAME_FIELD`], and a listing
//! walks the run's collections.

use anyhow::anyhow;
use reqwest::Method;
use serde_json::{json, Value};
use testkit::pod::Pod;
use testkit::resource::{KindFuture, OpError, Presence, ResourceKind, ResourceRef};
use testkit::Cx;

use crate::api::{call, classify, delete, op, request, Page};
use crate::{encode, quote, Collection, NAME_FIELD, RECORD};

/// A record this test created.
#[derive(Debug, Clone)]
pub struct Record {
    collection: String,
    name: String,
    data: Value,
}

impl Record {
    /// Creates a record in `collection` with `fields` (a JSON object) and a
    /// name of the run in [`NAME_FIELD`]; tracked by the id PocketBase
    /// answers.
    pub async fn create(cx: &Cx, collection: &Collection, fields: Value) -> anyhow::Result<Record> {
        let pod = cx.pod()?;
        let name = cx.unique_name_for(RECORD)?;
        let mut body = match fields {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            other => return Err(anyhow!("record fields must be a JSON object, not {other}")),
        };
        body.insert(NAME_FIELD.to_owned(), json!(name));
        let body = Value::Object(body);
        let path = records_path(collection.name());
        let data = cx
            .create_with_id(RECORD, &name, async {
                let data = call(pod, Method::POST, &path, Some(&body)).await?;
                let id = data.get("id").and_then(Value::as_str).ok_or_else(|| {
                    anyhow!("POST {path} answered a record without an id: {data}")
                })?;
                Ok::<_, anyhow::Error>((format!("{}/{id}", collection.name()), data))
            })
            .await?;
        Ok(Record {
            collection: collection.name().to_owned(),
            name,
            data,
        })
    }

    /// The id PocketBase assigned.
    pub fn id(&self) -> &str {
        self.data.get("id").and_then(Value::as_str).unwrap_or("")
    }

    /// Its name, in [`NAME_FIELD`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the create answered.
    pub fn data(&self) -> &Value {
        &self.data
    }

    /// `GET /api/collections/{collection}/records/{id}`.
    pub async fn get(pod: &Pod, collection: &str, id: &str) -> anyhow::Result<Value> {
        call(pod, Method::GET, &record_path(collection, id), None).await
    }

    /// `GET /api/collections/{collection}/records` with `filter` and `sort`
    /// (either may be empty), page `page`, `per_page` a page.
    pub async fn list(
        pod: &Pod,
        collection: &str,
        filter: &str,
        sort: &str,
        page: u64,
        per_page: u64,
    ) -> anyhow::Result<Page> {
        let path = format!(
            "{}?filter={}&sort={}&page={page}&perPage={per_page}",
            records_path(collection),
            encode(filter),
            encode(sort)
        );
        Page::parse(&call(pod, Method::GET, &path, None).await?, &path)
    }

    /// Deletes it, checks that it is gone and stops tracking it.
    pub async fn delete(self, cx: &Cx) -> anyhow::Result<()> {
        let pod = cx.pod()?;
        let path = record_path(&self.collection, self.id());
        call(pod, Method::DELETE, &path, None).await?;
        crate::wait_status(cx, &path, 404).await?;
        cx.forget(RECORD, &self.name);
        Ok(())
    }
}

fn collection_path(collection: &str) -> String {
    format!("/api/collections/{}", encode(collection))
}

fn records_path(collection: &str) -> String {
    format!("{}/records", collection_path(collection))
}

fn record_path(collection: &str, id: &str) -> String {
    format!("{}/{}", records_path(collection), encode(id))
}

/// The kind `record` (`[resources.record] rust = true`): what the test
/// process, its reaper and the runner's residue sweep (through a test
/// binary of the suite) use to delete, check and find records.
#[derive(Debug, Clone, Copy, Default)]
pub struct Records;

/// The largest page PocketBase serves; a run's records fit in one.
const MAX_PAGE: u64 = 1000;

impl Records {
    /// Every record whose [`NAME_FIELD`] contains `text`, in every
    /// collection whose name contains `run_prefix` (the run's, so only the
    /// run's collections), with its `<collection>/<id>`.
    async fn find(pod: &Pod, run_prefix: &str, text: &str) -> Result<Vec<ResourceRef>, OpError> {
        // `~` without `%` is a literal "contains"; `_` stays `_`.
        let path = format!(
            "/api/collections?filter={}&perPage={MAX_PAGE}",
            encode(&format!("name~{}", quote(run_prefix)))
        );
        let listing = op(call(pod, Method::GET, &path, None).await)?;
        let collections = op(Page::parse(&listing, &path))?;
        let mut found = Vec::new();
        for c in &collections.items {
            let Some(name) = c.get("name").and_then(Value::as_str) else {
                continue;
            };
            // A collection without the field holds no record of the suite.
            let has_field = c
                .get("fields")
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|f| f.get("name") == Some(&json!(NAME_FIELD))));
            if !has_field {
                continue;
            }
            let filter = format!("{NAME_FIELD}~{}", quote(text));
            let (status, json) = op(request(
                pod,
                Method::GET,
                &format!(
                    "{}?filter={}&perPage={MAX_PAGE}&fields=id,{NAME_FIELD}",
                    records_path(name),
                    encode(&filter)
                ),
                None,
            )
            .await)?;
            // Deleted since it was listed: its records went with it.
            if status == 404 {
                continue;
            }
            if !(200..300).contains(&status) {
                let message = format!("listing records of {name}: {json}");
                // A collection being deleted by another test answers its
                // listing 400 for a moment; the same filter works elsewhere.
                if status == 400 {
                    let (now, _) =
                        op(request(pod, Method::GET, &collection_path(name), None).await)?;
                    if now == 404 {
                        continue;
                    }
                    return Err(OpError::Transient(message));
                }
                return Err(classify(status, message));
            }
            let page = op(Page::parse(&json, name))?;
            for item in page.items {
                if let (Some(id), Some(n)) = (
                    item.get("id").and_then(Value::as_str),
                    item.get(NAME_FIELD).and_then(Value::as_str),
                ) {
                    found.push(ResourceRef {
                        name: n.to_owned(),
                        id: Some(format!("{name}/{id}")),
                    });
                }
            }
        }
        Ok(found)
    }

    /// The resource with its id: as given, or found by its name (its
    /// creation may never have been answered). `None`: nothing has it.
    async fn located(pod: &Pod, r: &ResourceRef) -> Result<Option<(String, String)>, OpError> {
        let id = match &r.id {
            Some(id) => id.clone(),
            None => {
                let run_prefix = run_prefix_of(&r.name).ok_or_else(|| {
                    OpError::Permanent(format!("record name {:?} carries no run id", r.name))
                })?;
                let found = Records::find(pod, &run_prefix, &r.name).await?;
                match found.into_iter().find(|f| f.name == r.name) {
                    Some(f) => f.id.unwrap_or_default(),
                    None => return Ok(None),
                }
            }
        };
        match id.split_once('/') {
            Some((c, i)) if !c.is_empty() && !i.is_empty() => {
                Ok(Some((c.to_owned(), i.to_owned())))
            }
            _ => Err(OpError::Permanent(format!(
                "record id {id:?} is not `<collection>/<record id>`"
            ))),
        }
    }
}

/// `pb_<run>_…` → `pb_<run>_`.
fn run_prefix_of(name: &str) -> Option<String> {
    let mut parts = name.splitn(3, '_');
    let (prefix, run, _) = (parts.next()?, parts.next()?, parts.next()?);
    Some(format!("{prefix}_{run}_"))
}

impl ResourceKind for Records {
    fn delete<'a>(&'a self, pod: &'a Pod, r: &'a ResourceRef) -> KindFuture<'a, ()> {
        Box::pin(async move {
            let Some((collection, id)) = Records::located(pod, r).await? else {
                return Ok(());
            };
            let path = record_path(&collection, &id);
            delete(pod, &path).await
        })
    }

    fn exists<'a>(&'a self, pod: &'a Pod, r: &'a ResourceRef) -> KindFuture<'a, Presence> {
        Box::pin(async move {
            let Some((collection, id)) = Records::located(pod, r).await? else {
                return Ok(Presence::Gone);
            };
            let path = record_path(&collection, &id);
            let (status, json) = op(request(pod, Method::GET, &path, None).await)?;
            match status {
                // The record, or its whole collection ("Missing collection context").
                404 => Ok(Presence::Gone),
                200..=299 => Ok(Presence::Present(format!("GET {path} answered {status}"))),
                _ => Err(classify(
                    status,
                    format!("GET {path} answered {status}: {json}"),
                )),
            }
        })
    }

    fn list<'a>(&'a self, pod: &'a Pod, prefix: &'a str) -> KindFuture<'a, Vec<ResourceRef>> {
        Box::pin(async move {
            let found = Records::find(pod, prefix, prefix).await?;
            Ok(found
                .into_iter()
                .filter(|f| f.name.starts_with(prefix))
                .collect())
        })
    }
}
