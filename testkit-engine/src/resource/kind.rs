//! Resource kinds: how to check, delete and list the resources of one kind.
//! A kind is declared in the suite's `testkit.toml`, so that test processes,
//! their reapers, the runner and the janitor all use the same one.
//!
//! For plain REST services a kind is HTTP templates:
//!
//! ```toml
//! [resources.sandbox]
//! exists = "GET /api/sandboxes/{name}"        # `gone` statuses: gone; 2xx: still there
//! delete = "DELETE /api/sandboxes/{name}"     # 2xx or a `gone` status: accepted
//! list = "GET /api/sandboxes?prefix={prefix}&limit=1000"
//! list_names = "/items/*/name"                # JSON pointer with one `*` over an array
//! next_page = "/next_page_token"              # optional; sent back as `page_token=`
//! budget = 4                                  # optional: live resources per run
//! delete_timeout = "30s"                      # optional: delete + verify, per resource
//! ```
//!
//! and, where the service needs them:
//!
//! ```toml
//! delete_body = '{"key": "{name}"}'           # a body for `delete` (`exists_body` too)
//! gone = [404]                                # statuses of `exists` that mean gone
//! gone_if = { pointer = "/state", equals = ["deleted"] }  # a 2xx answer that means gone
//! gone_if = { pointer = "/kvs", missing = true }          # …or one without the thing
//! list_ids = "/items/*/id"                    # server-assigned ids: `{id}` in templates
//! names = { separator = "_", max_len = 40 }   # the names `cx.unique_name_for` makes
//! ```
//!
//! Templates may use `{name}`, `{id}`, `{prefix}` (the run's name prefix),
//! `{run}` and every field of the pod handle (`{user}`…).
//!
//! For everything else a kind is Rust: `rust = true` in `testkit.toml`, and
//! a [`ResourceKind`] registered with [`resource_kind!`](crate::resource_kind)
//! in the suite's code. The runner links no suite code: it asks the suite's
//! own test binaries to sweep such kinds.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;

use super::names::Naming;
use crate::config::SuiteConfig;
use crate::pod::Pod;
use crate::template::{encode, RequestTemplate, Values};

/// How long deleting and verifying one resource may take, unless the kind
/// says otherwise.
pub(super) const DEFAULT_DELETE_TIMEOUT: Duration = Duration::from_secs(30);

/// Every page of a listing is bounded, and so is the number of pages, so a
/// pod that keeps handing out tokens cannot make a sweep loop forever.
const MAX_PAGES: usize = 1000;

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// One resource: the name that carries the run id, and the id the service
/// gave it, when it gives one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResourceRef {
    /// The name (or label) that carries the run id.
    pub name: String,
    /// The server-assigned id, when the kind has them.
    pub id: Option<String>,
}

impl ResourceRef {
    /// A resource known by its name alone.
    pub fn named(name: impl Into<String>) -> ResourceRef {
        ResourceRef {
            name: name.into(),
            id: None,
        }
    }
}

/// A request about a resource that failed, sorted by whether retrying can
/// help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpError {
    /// 429, 5xx, a connection error or a timeout.
    Transient(String),
    /// Anything else: retrying will not help.
    Permanent(String),
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpError::Transient(m) | OpError::Permanent(m) => f.write_str(m),
        }
    }
}

/// What asking whether a resource exists found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// It is gone.
    Gone,
    /// Still there; a short description (e.g. its state) for logs.
    Present(String),
}

/// How the pod answered a delete it did not refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeleteAnswer {
    /// It accepted the deletion.
    Accepted,
    /// There was nothing to delete: the resource was already gone.
    AlreadyGone,
}

/// The future a [`ResourceKind`] method returns.
pub type KindFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, OpError>> + Send + 'a>>;

/// A resource kind in Rust, for what templates cannot say (bodies of their
/// own, encodings, services whose "gone" is not a status). Creating is the
/// test's; deleting, checking and listing are the kind's. Register it with
/// testkit's `resource_kind!` and declare it in `testkit.toml`
/// as `[resources.NAME] rust = true`.
pub trait ResourceKind: Send + Sync + 'static {
    /// Asks for the deletion: `Ok` once the service accepted it or the
    /// resource was already gone.
    fn delete<'a>(&'a self, pod: &'a Pod, resource: &'a ResourceRef) -> KindFuture<'a, ()>;
    /// Whether the resource is still there.
    fn exists<'a>(&'a self, pod: &'a Pod, resource: &'a ResourceRef) -> KindFuture<'a, Presence>;
    /// Every resource whose name starts with `prefix` (the run's), with its id.
    fn list<'a>(&'a self, pod: &'a Pod, prefix: &'a str) -> KindFuture<'a, Vec<ResourceRef>>;
}

/// The Rust kinds a process links, by the name `testkit.toml` declares them
/// by: testkit's `resource_kind!` registers them in a test binary.
pub type LinkedKinds<'a> = &'a [(&'static str, &'static dyn ResourceKind)];

/// The resource kinds a suite declares.
#[derive(Debug, Clone, Default)]
pub struct Kinds {
    kinds: BTreeMap<String, KindSpec>,
}

/// One resource kind.
#[derive(Debug, Clone)]
pub struct KindSpec {
    name: String,
    ops: Ops,
    budget: Option<usize>,
    delete_timeout: Duration,
    naming: Naming,
}

#[derive(Clone)]
enum Ops {
    Http(Box<Http>),
    Rust(&'static dyn ResourceKind),
    /// `rust = true`, and this binary registers no such kind (the runner).
    Elsewhere,
}

impl fmt::Debug for Ops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ops::Http(h) => f.debug_tuple("Http").field(h).finish(),
            Ops::Rust(_) => f.write_str("Rust"),
            Ops::Elsewhere => f.write_str("Elsewhere"),
        }
    }
}

#[derive(Debug, Clone)]
struct Http {
    exists: RequestTemplate,
    delete: RequestTemplate,
    list: RequestTemplate,
    list_names: (String, String),
    list_ids: Option<(String, String)>,
    next_page: Option<String>,
    gone: Vec<u16>,
    gone_if: Option<GoneIf>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct GoneIf {
    pointer: String,
    #[serde(default)]
    equals: Vec<String>,
    #[serde(default)]
    missing: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKind {
    #[serde(default)]
    rust: bool,
    #[serde(default)]
    exists: Option<String>,
    #[serde(default)]
    exists_body: Option<String>,
    #[serde(default)]
    delete: Option<String>,
    #[serde(default)]
    delete_body: Option<String>,
    #[serde(default)]
    list: Option<String>,
    #[serde(default)]
    list_names: Option<String>,
    #[serde(default)]
    list_ids: Option<String>,
    #[serde(default)]
    next_page: Option<String>,
    #[serde(default)]
    gone: Option<Vec<u16>>,
    #[serde(default)]
    gone_if: Option<GoneIf>,
    #[serde(default)]
    budget: Option<usize>,
    #[serde(default)]
    delete_timeout: Option<String>,
    #[serde(default)]
    names: Option<RawNames>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNames {
    #[serde(default = "default_separator")]
    separator: char,
    #[serde(default = "default_max_len")]
    max_len: usize,
}

fn default_separator() -> char {
    '-'
}
fn default_max_len() -> usize {
    super::names::MAX_NAME_LEN
}

/// A `[resources.<kind>]` table that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid {}: `resources.{kind}{}` {problem}", path.display(), key.map(|k| format!(".{k}")).unwrap_or_default())]
pub struct KindError {
    path: PathBuf,
    kind: String,
    key: Option<&'static str>,
    problem: String,
}

/// `"/items/*/name"` → `("/items", "/name")`.
fn split_pointer(text: &str) -> Option<(String, String)> {
    match text.split_once("/*") {
        Some((array, rest))
            if !rest.contains('*') && (array.is_empty() || array.starts_with('/')) =>
        {
            Some((array.to_owned(), rest.to_owned()))
        }
        _ => None,
    }
}

impl Kinds {
    /// The kinds of a loaded `testkit.toml`; `path` is used in errors only.
    /// Every Rust kind is elsewhere: in a test binary of the suite.
    pub fn from_config(config: &SuiteConfig, path: &Path) -> Result<Kinds, KindError> {
        Kinds::parse(&config.resources, path, &[])
    }

    /// The kinds of a loaded `testkit.toml`, with the Rust kinds `linked`.
    pub fn from_config_linking(
        config: &SuiteConfig,
        path: &Path,
        linked: LinkedKinds<'_>,
    ) -> Result<Kinds, KindError> {
        Kinds::parse(&config.resources, path, linked)
    }

    /// The kinds of `[resources]` tables; `path` is used in errors only.
    pub fn parse(
        tables: &BTreeMap<String, toml::Value>,
        path: &Path,
        linked: LinkedKinds<'_>,
    ) -> Result<Kinds, KindError> {
        let mut kinds = BTreeMap::new();
        for (name, value) in tables {
            let spec = parse_kind(name, value, linked).map_err(|(key, problem)| KindError {
                path: path.to_owned(),
                kind: name.clone(),
                key,
                problem,
            })?;
            kinds.insert(name.clone(), spec);
        }
        Ok(Kinds { kinds })
    }

    /// The kind named `name`.
    pub fn get(&self, name: &str) -> Option<&KindSpec> {
        self.kinds.get(name)
    }

    /// Every kind, by name.
    pub fn iter(&self) -> impl Iterator<Item = &KindSpec> {
        self.kinds.values()
    }

    /// Adds `spec`, replacing a kind of its name.
    pub fn insert(&mut self, spec: KindSpec) {
        self.kinds.insert(spec.name.clone(), spec);
    }

    /// `a`, `b`, or `none` when there are none: for error messages.
    pub fn names(&self) -> String {
        if self.kinds.is_empty() {
            "none".to_owned()
        } else {
            self.kinds
                .keys()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

type Problem = (Option<&'static str>, String);

fn parse_kind(
    name: &str,
    value: &toml::Value,
    linked: LinkedKinds<'_>,
) -> Result<KindSpec, Problem> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err((
            None,
            "has an invalid name: expected letters, digits, `_` and `-`".to_owned(),
        ));
    }
    let raw = RawKind::deserialize(value.clone()).map_err(|e| (None, e.message().to_owned()))?;
    if raw.budget == Some(0) {
        return Err((
            Some("budget"),
            "is 0: expected at least 1, or no budget".to_owned(),
        ));
    }
    let delete_timeout = match raw.delete_timeout.as_deref() {
        None => DEFAULT_DELETE_TIMEOUT,
        Some(text) => humantime::parse_duration(text.trim())
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                (
                    Some("delete_timeout"),
                    format!("is {text:?}: expected a duration such as 30s"),
                )
            })?,
    };
    let naming = match &raw.names {
        None => Naming::default(),
        Some(n) => Naming::new(n.separator, n.max_len).map_err(|p| (Some("names"), p))?,
    };
    let ops = if raw.rust {
        let http_keys = [
            ("exists", raw.exists.is_some()),
            ("delete", raw.delete.is_some()),
            ("list", raw.list.is_some()),
            ("list_names", raw.list_names.is_some()),
        ];
        if let Some((key, _)) = http_keys.iter().find(|(_, set)| *set) {
            return Err((
                Some(key),
                "is set, but `rust = true` says the kind is Rust code: keep one of the two"
                    .to_owned(),
            ));
        }
        match linked.iter().find(|(n, _)| *n == name) {
            Some((_, kind)) => Ops::Rust(*kind),
            None => Ops::Elsewhere,
        }
    } else {
        Ops::Http(Box::new(parse_http(&raw)?))
    };
    Ok(KindSpec {
        name: name.to_owned(),
        ops,
        budget: raw.budget,
        delete_timeout,
        naming,
    })
}

fn parse_http(raw: &RawKind) -> Result<Http, Problem> {
    let required = |key: &'static str, v: &Option<String>| {
        v.clone().ok_or_else(|| {
            (
                Some(key),
                "is missing: a kind is HTTP templates (exists, delete, list, list_names) \
                 or `rust = true`"
                    .to_owned(),
            )
        })
    };
    let exists = RequestTemplate::parse(&required("exists", &raw.exists)?)
        .map_err(|p| (Some("exists"), p))?
        .with_body(raw.exists_body.clone());
    let delete = RequestTemplate::parse(&required("delete", &raw.delete)?)
        .map_err(|p| (Some("delete"), p))?
        .with_body(raw.delete_body.clone());
    let list =
        RequestTemplate::parse(&required("list", &raw.list)?).map_err(|p| (Some("list"), p))?;
    let list_names_text = required("list_names", &raw.list_names)?;
    let list_names = split_pointer(&list_names_text).ok_or_else(|| {
        (
            Some("list_names"),
            format!("is {list_names_text:?}: expected a JSON pointer with one `/*` over an array, e.g. \"/items/*/name\""),
        )
    })?;
    let list_ids = match &raw.list_ids {
        None => None,
        Some(text) => Some(split_pointer(text).ok_or_else(|| {
            (
                Some("list_ids"),
                format!("is {text:?}: expected a JSON pointer with one `/*` over an array, e.g. \"/items/*/id\""),
            )
        })?),
    };
    if let Some(ids) = &list_ids {
        if ids.0 != list_names.0 {
            return Err((
                Some("list_ids"),
                format!(
                    "points into {:?}, but `list_names` into {:?}: both must read the same array",
                    ids.0, list_names.0
                ),
            ));
        }
    }
    for (key, t) in [("exists", &exists), ("delete", &delete)] {
        if !t.uses("name") && !t.uses("id") {
            return Err((
                Some(key),
                format!(
                    "is {:?}: expected a `{{name}}` or `{{id}}` placeholder",
                    t.to_string()
                ),
            ));
        }
        if t.uses("id") && list_ids.is_none() {
            return Err((
                Some(key),
                "uses `{id}`: then `list_ids` must say where a listing holds the ids, \
                 so that a resource whose creation was never answered can still be found"
                    .to_owned(),
            ));
        }
    }
    if !list.uses("prefix") && !list.uses("run") {
        return Err((
            Some("list"),
            format!(
                "is {:?}: expected a `{{prefix}}` (or `{{run}}`) placeholder, so that it lists \
                 only what the run created",
                list.to_string()
            ),
        ));
    }
    if let Some(p) = raw
        .next_page
        .as_deref()
        .filter(|p| !p.is_empty() && !p.starts_with('/'))
    {
        return Err((
            Some("next_page"),
            format!("is {p:?}: expected a JSON pointer, e.g. \"/next_page_token\""),
        ));
    }
    let gone = raw.gone.clone().unwrap_or_else(|| vec![404]);
    if gone.iter().any(|s| !(200..600).contains(s)) {
        return Err((Some("gone"), format!("is {gone:?}: expected HTTP statuses")));
    }
    if let Some(g) = &raw.gone_if {
        if !g.pointer.starts_with('/') {
            return Err((
                Some("gone_if"),
                format!(
                    "has pointer {:?}: expected a JSON pointer, e.g. \"/state\"",
                    g.pointer
                ),
            ));
        }
        if g.equals.is_empty() != g.missing {
            return Err((
                Some("gone_if"),
                "must say `equals = [\"deleted\", …]` or `missing = true`, not both".to_owned(),
            ));
        }
    }
    Ok(Http {
        exists,
        delete,
        list,
        list_names,
        list_ids,
        next_page: raw.next_page.clone().filter(|p| !p.is_empty()),
        gone,
        gone_if: raw.gone_if.clone(),
    })
}

impl KindSpec {
    /// The kind's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many resources of this kind may exist at once in a run.
    pub fn budget(&self) -> Option<usize> {
        self.budget
    }

    /// How long deleting and verifying one resource may take.
    pub fn delete_timeout(&self) -> Duration {
        self.delete_timeout
    }

    /// How the kind's names look.
    pub fn naming(&self) -> Naming {
        self.naming
    }

    /// Whether the kind is Rust code that this binary does not link (the
    /// runner): a test binary of the suite must do its work.
    pub fn is_elsewhere(&self) -> bool {
        matches!(self.ops, Ops::Elsewhere)
    }

    /// Whether the kind's resources are known by server-assigned ids.
    pub fn has_ids(&self) -> bool {
        match &self.ops {
            Ops::Http(h) => h.list_ids.is_some(),
            Ops::Rust(_) | Ops::Elsewhere => true,
        }
    }

    fn elsewhere(&self) -> OpError {
        OpError::Permanent(format!(
            "kind `{}` is Rust code (`rust = true`) that this binary does not register: \
             add `testkit::resource_kind!(\"{}\", YourKind);` to code every test binary of the \
             suite links (its support crate)",
            self.name, self.name
        ))
    }

    /// Whether the resource `r` is still there.
    pub async fn exists(&self, pod: &Pod, r: &ResourceRef) -> Result<Presence, OpError> {
        let http = match &self.ops {
            Ops::Http(h) => h,
            Ops::Rust(k) => return k.exists(pod, r).await,
            Ops::Elsewhere => return Err(self.elsewhere()),
        };
        let r = self.with_id(pod, r).await?;
        let Some(r) = r else {
            // Not listed under its name: nothing carries it any more.
            return Ok(Presence::Gone);
        };
        let (status, body, sent) = send(pod, &http.exists, &r, "").await?;
        if http.gone.contains(&status.as_u16()) {
            return Ok(Presence::Gone);
        }
        if !status.is_success() {
            return Err(classify(&http.exists, status, &body));
        }
        let json = serde_json::from_str::<serde_json::Value>(&body).ok();
        if let Some(rule) = &http.gone_if {
            let at = json.as_ref().and_then(|j| j.pointer(&rule.pointer));
            let gone = json.is_some()
                && if rule.missing {
                    match at {
                        None | Some(serde_json::Value::Null) => true,
                        Some(serde_json::Value::Array(a)) => a.is_empty(),
                        Some(serde_json::Value::Object(o)) => o.is_empty(),
                        Some(serde_json::Value::String(s)) => s.is_empty(),
                        Some(_) => false,
                    }
                } else {
                    at.map(pointer_text)
                        .is_some_and(|t| rule.equals.contains(&t))
                };
            if gone {
                return Ok(Presence::Gone);
            }
            // What was sent and what was read, so that a leak message says
            // why the answer did not mean gone: the filled request (never
            // the template) and the value at the pointer.
            let read = match (&json, at) {
                (None, _) => "an answer that is not JSON".to_owned(),
                (Some(_), None) => format!("nothing at {:?}", rule.pointer),
                (Some(_), Some(v)) => format!("{:?} = {}", rule.pointer, shorten(&v.to_string())),
            };
            let wanted = if rule.missing {
                "missing or empty".to_owned()
            } else {
                format!("one of {:?}", rule.equals)
            };
            return Ok(Presence::Present(format!(
                "{sent} answered {status} with {read} (`gone_if` wants it {wanted})"
            )));
        }
        let state = json.and_then(|v| {
            v.get("state")
                .and_then(|s| s.as_str())
                .map(|s| format!("state={s}"))
        });
        Ok(Presence::Present(
            state.unwrap_or_else(|| format!("{sent} answered {status}")),
        ))
    }

    /// Asks for the deletion; `Ok` when the pod accepted it or the resource
    /// was already gone.
    pub async fn delete(&self, pod: &Pod, r: &ResourceRef) -> Result<(), OpError> {
        self.delete_answer(pod, r).await.map(drop)
    }

    /// Asks for the deletion, and says whether the pod accepted it or the
    /// resource was already gone (a `gone` status, or nothing listed under
    /// its name). A Rust kind's `delete` cannot tell: its answer is
    /// [`DeleteAnswer::Accepted`].
    pub async fn delete_answer(&self, pod: &Pod, r: &ResourceRef) -> Result<DeleteAnswer, OpError> {
        let http = match &self.ops {
            Ops::Http(h) => h,
            Ops::Rust(k) => return k.delete(pod, r).await.map(|()| DeleteAnswer::Accepted),
            Ops::Elsewhere => return Err(self.elsewhere()),
        };
        let Some(r) = self.with_id(pod, r).await? else {
            return Ok(DeleteAnswer::AlreadyGone);
        };
        let (status, body, _) = send(pod, &http.delete, &r, "").await?;
        if status.is_success() {
            Ok(DeleteAnswer::Accepted)
        } else if http.gone.contains(&status.as_u16()) {
            Ok(DeleteAnswer::AlreadyGone)
        } else {
            Err(classify(&http.delete, status, &body))
        }
    }

    /// A resource of a kind with ids, with its id: as given, else found by
    /// listing its name (its creation may never have been answered). `None`
    /// when nothing of that name is listed.
    async fn with_id(&self, pod: &Pod, r: &ResourceRef) -> Result<Option<ResourceRef>, OpError> {
        if r.id.is_some() || !self.has_ids() {
            return Ok(Some(r.clone()));
        }
        let listed = self.list(pod, &r.name).await?;
        Ok(listed.into_iter().find(|l| l.name == r.name))
    }

    /// Every resource the pod lists under `prefix`, across pages.
    pub async fn list(&self, pod: &Pod, prefix: &str) -> Result<Vec<ResourceRef>, OpError> {
        let http = match &self.ops {
            Ops::Http(h) => h,
            Ops::Rust(k) => return k.list(pod, prefix).await,
            Ops::Elsewhere => return Err(self.elsewhere()),
        };
        let mut found = Vec::new();
        let mut token: Option<String> = None;
        let query = ResourceRef::named(prefix);
        for _ in 0..MAX_PAGES {
            let extra = token
                .as_deref()
                .map(|t| format!("page_token={}", encode(t)))
                .unwrap_or_default();
            let (status, body, _) = send(pod, &http.list, &query, &extra).await?;
            if !status.is_success() {
                return Err(classify(&http.list, status, &body));
            }
            let json: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
                OpError::Permanent(format!(
                    "{} answered something that is not JSON: {e}",
                    http.list
                ))
            })?;
            let (array, field) = &http.list_names;
            let items = json
                .pointer(array)
                .and_then(|a| a.as_array())
                .ok_or_else(|| {
                    OpError::Permanent(format!(
                        "{} answered JSON without an array at {array:?} (`list_names`)",
                        http.list
                    ))
                })?;
            for item in items {
                let Some(name) = item.pointer(field).and_then(|n| n.as_str()) else {
                    return Err(OpError::Permanent(format!(
                        "{} answered an item without a string at {field:?} (`list_names`)",
                        http.list
                    )));
                };
                let id = match &http.list_ids {
                    None => None,
                    Some((_, id_field)) => match item.pointer(id_field) {
                        Some(serde_json::Value::String(s)) => Some(s.clone()),
                        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
                        _ => {
                            return Err(OpError::Permanent(format!(
                                "{} answered an item without an id at {id_field:?} (`list_ids`)",
                                http.list
                            )))
                        }
                    },
                };
                // A listing by prefix may be loose (a `LIKE`, a substring):
                // keep what really starts with it.
                if name.starts_with(prefix) {
                    found.push(ResourceRef {
                        name: name.to_owned(),
                        id,
                    });
                }
            }
            token = http
                .next_page
                .as_deref()
                .and_then(|p| json.pointer(p))
                .and_then(|t| t.as_str())
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if token.is_none() {
                return Ok(found);
            }
        }
        Err(OpError::Permanent(format!(
            "{} kept answering with a next page after {MAX_PAGES} pages",
            http.list
        )))
    }
}

/// A value read at a `gone_if` pointer as `equals` compares it: a string as
/// it is, anything else as JSON.
fn pointer_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// `text`, cut at 300 bytes.
fn shorten(text: &str) -> String {
    let mut text = text.trim().to_owned();
    if text.len() > 300 {
        let mut end = 300;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

fn classify(template: &RequestTemplate, status: StatusCode, body: &str) -> OpError {
    let body = shorten(body);
    let message = format!("{template} answered {status}: {body}");
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        OpError::Transient(message)
    } else {
        OpError::Permanent(message)
    }
}

/// Sends `template` filled for `r`: the answer's status and body, and the
/// request as it was sent (`GET /path?query`, redacted) for messages.
async fn send(
    pod: &Pod,
    template: &RequestTemplate,
    r: &ResourceRef,
    extra_query: &str,
) -> Result<(StatusCode, String, String), OpError> {
    let port = pod.port().to_string();
    let run = pod.run_id();
    let mut values: Values<'_> = pod
        .handle()
        .values(&port)
        .with("name", &r.name)
        .with("prefix", &r.name)
        .with("run", run);
    if let Some(id) = &r.id {
        values = values.with("id", id);
    }
    let mut path = template
        .render_path(&values)
        .map_err(|p| OpError::Permanent(format!("{template}: {p}")))?;
    let body = template
        .render_body(&values)
        .map_err(|p| OpError::Permanent(format!("{template} body: {p}")))?;
    if !extra_query.is_empty() {
        path.push(if path.contains('?') { '&' } else { '?' });
        path.push_str(extra_query);
    }
    let url = pod.url(&path);
    let response = pod
        .send(|c| {
            let mut request = c
                .request(template.method().clone(), &url)
                .timeout(REQUEST_TIMEOUT);
            if let Some(body) = &body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone());
            }
            request
        })
        .await
        .map_err(|e| {
            OpError::Transient(format!(
                "{} {path} failed: {}",
                template.method(),
                error_chain(&e)
            ))
        })?;
    let status = response.status();
    let body = response.text().await.map_err(|e| {
        OpError::Transient(format!(
            "{} {path}: reading the answer failed: {}",
            template.method(),
            error_chain(&e)
        ))
    })?;
    let sent = crate::redact(&format!("{} {path}", template.method())).into_owned();
    Ok((status, body, sent))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Kinds, KindError> {
        let table: toml::Table = toml::from_str(text).unwrap();
        let resources = table
            .get("resources")
            .and_then(|r| r.as_table())
            .cloned()
            .unwrap_or_default();
        Kinds::parse(
            &resources.into_iter().collect(),
            Path::new("/s/testkit.toml"),
            &[],
        )
    }

    const SANDBOX: &str = r#"
        [resources.sandbox]
        exists = "GET /api/sandboxes/{name}"
        delete = "DELETE /api/sandboxes/{name}"
        list = "GET /api/sandboxes?prefix={prefix}&limit=1000"
        list_names = "/items/*/name"
        next_page = "/next_page_token"
        budget = 2
        delete_timeout = "5s"
    "#;

    #[test]
    fn a_full_kind_parses() {
        let kinds = parse(SANDBOX).unwrap();
        let k = kinds.get("sandbox").unwrap();
        assert_eq!(k.budget(), Some(2));
        assert_eq!(k.delete_timeout(), Duration::from_secs(5));
        let Ops::Http(http) = &k.ops else {
            panic!("templates make an HTTP kind")
        };
        assert_eq!(http.list_names, ("/items".to_owned(), "/name".to_owned()));
        assert_eq!(
            http.exists
                .render_path(&Values::new().with("name", "a b/c"))
                .unwrap(),
            "/api/sandboxes/a%20b%2Fc"
        );
        assert_eq!(http.gone, [404]);
        assert!(!k.has_ids());
        assert_eq!(kinds.names(), "`sandbox`");
    }

    #[test]
    fn ids_bodies_gone_rules_and_names_parse() {
        let kinds = parse(
            r#"
            [resources.record]
            exists = "GET /api/records/{id}"
            delete = "POST /api/delete"
            delete_body = '{"id": "{id}", "owner": "{user}"}'
            list = "GET /api/records?filter=(name~'{prefix}')"
            list_names = "/items/*/name"
            list_ids = "/items/*/id"
            gone = [404, 410]
            gone_if = { pointer = "/state", equals = ["deleted"] }
            names = { separator = "_", max_len = 40 }
            "#,
        )
        .unwrap();
        let k = kinds.get("record").unwrap();
        assert!(k.has_ids());
        assert_eq!(k.naming(), Naming::new('_', 40).unwrap());
        let Ops::Http(http) = &k.ops else { panic!() };
        assert_eq!(http.gone, [404, 410]);
        assert!(http.delete.body().unwrap().contains("{id}"));
    }

    #[test]
    fn what_a_kind_lacks_is_named() {
        let e = parse(
            "[resources.r]
exists = \"GET /r/{id}\"
delete = \"DELETE /r/{id}\"
list = \"GET /r?p={prefix}\"
list_names = \"/*/name\"",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("resources.r.exists") && e.contains("list_ids"),
            "{e}"
        );
        let e = parse(
            "[resources.r]
rust = true
list = \"GET /x?{prefix}\"",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("resources.r.list") && e.contains("rust = true"),
            "{e}"
        );
        let e = parse(
            "[resources.r]
exists = \"GET /r/{name}\"",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("resources.r.delete") && e.contains("missing"),
            "{e}"
        );
        let e =
            parse(&SANDBOX.replace("budget = 2", "names = { separator = \"_\", max_len = 10 }"))
                .unwrap_err()
                .to_string();
        assert!(
            e.contains("resources.sandbox.names") && e.contains("too short"),
            "{e}"
        );
        let e = parse(&SANDBOX.replace("budget = 2", "gone_if = { pointer = \"/s\" }"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("resources.sandbox.gone_if"), "{e}");
    }

    /// A `gone_if` that does not hold says what was sent and what the
    /// pointer read: the filled request, never its template.
    #[test]
    fn a_gone_if_that_does_not_hold_names_the_request_sent_and_the_value_read() {
        let pod = test_support::Sandboxd::start(&[]);
        let config = SuiteConfig::default();
        let handle = crate::pod::PodHandle::parse(
            pod.handle_json(),
            &crate::pod::HandlePolicy::from_suite(&config),
        )
        .unwrap();
        let kinds = parse(
            r#"
            [resources.listed]
            exists = "GET /api/sandboxes?prefix=%22{name}%22&limit=1000"
            delete = "DELETE /api/sandboxes/{name}"
            list = "GET /api/sandboxes?prefix={prefix}&limit=1000"
            list_names = "/items/*/name"
            gone_if = { pointer = "/next_page_token", equals = ["gone"] }
            "#,
        )
        .unwrap();
        let kind = kinds.get("listed").unwrap();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let pod = crate::pod::connect(handle, &config, None).await.unwrap();
                let name = "ct-gone-if-probe";
                let presence = kind.exists(&pod, &ResourceRef::named(name)).await.unwrap();
                let Presence::Present(what) = presence else {
                    panic!("the pointer does not say gone: {presence:?}")
                };
                assert!(
                    !what.contains("{name}"),
                    "the message shows the template, not the request sent: {what}"
                );
                assert!(
                    what.contains(&format!("/api/sandboxes?prefix=%22{name}%22&limit=1000")),
                    "the message does not name the request sent: {what}"
                );
                assert!(
                    what.contains("/next_page_token") && what.contains("null"),
                    "the message does not say what the pointer read: {what}"
                );
            });
    }

    #[test]
    fn a_rust_kind_this_binary_does_not_register_is_elsewhere() {
        let kinds = parse(
            "[resources.record]
rust = true
budget = 3",
        )
        .unwrap();
        let k = kinds.get("record").unwrap();
        assert!(k.is_elsewhere());
        assert_eq!(k.budget(), Some(3));
    }

    #[test]
    fn errors_name_the_kind_the_key_and_the_file() {
        let e = parse(&SANDBOX.replace("budget = 2", "budgit = 2"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/s/testkit.toml")
                && e.contains("resources.sandbox")
                && e.contains("budgit"),
            "{e}"
        );
        let e = parse(&SANDBOX.replace("/items/*/name", "/items/name"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("resources.sandbox.list_names"), "{e}");
        let e = parse(&SANDBOX.replace("DELETE /api/sandboxes/{name}", "DELETE /api/sandboxes"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("resources.sandbox.delete") && e.contains("{name}"),
            "{e}"
        );
        let e = parse(&SANDBOX.replace("\"5s\"", "\"soon\""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("resources.sandbox.delete_timeout"), "{e}");
        let e = parse(&SANDBOX.replace("budget = 2", "budget = 0"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("resources.sandbox.budget"), "{e}");
    }
}
