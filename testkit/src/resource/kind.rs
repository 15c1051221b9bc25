//! Resource kinds, declared in the suite's `testkit.toml` as HTTP templates so
//! that test processes, their reapers, the runner and the janitor can all use
//! them without linking suite code:
//!
//! ```toml
//! [resources.sandbox]
//! exists = "GET /api/sandboxes/{name}"        # 404: gone; 2xx: still there
//! delete = "DELETE /api/sandboxes/{name}"     # 2xx or 404: accepted
//! list = "GET /api/sandboxes?prefix={prefix}&limit=1000"
//! list_names = "/items/*/name"                # JSON pointer with one `*` over an array
//! next_page = "/next_page_token"              # optional; sent back as `page_token=`
//! budget = 4                                  # optional: live resources per run
//! delete_timeout = "30s"                      # optional: delete + verify, per resource
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::Deserialize;

use crate::config::SuiteConfig;
use crate::pod::Pod;

/// How long deleting and verifying one resource may take, unless the kind
/// says otherwise.
pub(crate) const DEFAULT_DELETE_TIMEOUT: Duration = Duration::from_secs(30);

/// Every page of a listing is bounded, and so is the number of pages, so a
/// pod that keeps handing out tokens cannot make a sweep loop forever.
const MAX_PAGES: usize = 1000;

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The resource kinds a suite declares.
#[derive(Debug, Clone, Default)]
pub struct Kinds {
    kinds: BTreeMap<String, KindSpec>,
}

/// One resource kind: how to check, delete and list resources by name.
#[derive(Debug, Clone)]
pub struct KindSpec {
    name: String,
    exists: Template,
    delete: Template,
    list: Template,
    list_names: (String, String),
    next_page: Option<String>,
    budget: Option<usize>,
    delete_timeout: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKind {
    exists: String,
    delete: String,
    list: String,
    list_names: String,
    #[serde(default)]
    next_page: Option<String>,
    #[serde(default)]
    budget: Option<usize>,
    #[serde(default)]
    delete_timeout: Option<String>,
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

impl Kinds {
    /// The kinds of a loaded `testkit.toml`; `path` is used in errors only.
    pub fn from_config(config: &SuiteConfig, path: &Path) -> Result<Kinds, KindError> {
        Kinds::parse(&config.resources, path)
    }

    pub(crate) fn parse(
        tables: &BTreeMap<String, toml::Value>,
        path: &Path,
    ) -> Result<Kinds, KindError> {
        let mut kinds = BTreeMap::new();
        for (name, value) in tables {
            let err = |key, problem: String| KindError {
                path: path.to_owned(),
                kind: name.clone(),
                key,
                problem,
            };
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(err(
                    None,
                    "has an invalid name: expected letters, digits, `_` and `-`".to_owned(),
                ));
            }
            let raw = RawKind::deserialize(value.clone())
                .map_err(|e| err(None, e.message().to_owned()))?;
            let exists = Template::parse(&raw.exists).map_err(|p| err(Some("exists"), p))?;
            let delete = Template::parse(&raw.delete).map_err(|p| err(Some("delete"), p))?;
            let list = Template::parse(&raw.list).map_err(|p| err(Some("list"), p))?;
            if !exists.path.contains("{name}") {
                return Err(err(
                    Some("exists"),
                    format!("is {:?}: expected a `{{name}}` placeholder", raw.exists),
                ));
            }
            if !delete.path.contains("{name}") {
                return Err(err(
                    Some("delete"),
                    format!("is {:?}: expected a `{{name}}` placeholder", raw.delete),
                ));
            }
            if !list.path.contains("{prefix}") {
                return Err(err(
                    Some("list"),
                    format!("is {:?}: expected a `{{prefix}}` placeholder", raw.list),
                ));
            }
            let list_names = match raw.list_names.split_once("/*") {
                Some((array, rest)) if !rest.contains('*') && (array.is_empty() || array.starts_with('/')) => {
                    (array.to_owned(), rest.to_owned())
                }
                _ => {
                    return Err(err(
                        Some("list_names"),
                        format!("is {:?}: expected a JSON pointer with one `/*` over an array, e.g. \"/items/*/name\"", raw.list_names),
                    ))
                }
            };
            if let Some(p) = raw
                .next_page
                .as_deref()
                .filter(|p| !p.is_empty() && !p.starts_with('/'))
            {
                return Err(err(
                    Some("next_page"),
                    format!("is {p:?}: expected a JSON pointer, e.g. \"/next_page_token\""),
                ));
            }
            if raw.budget == Some(0) {
                return Err(err(
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
                        err(
                            Some("delete_timeout"),
                            format!("is {text:?}: expected a duration such as 30s"),
                        )
                    })?,
            };
            kinds.insert(
                name.clone(),
                KindSpec {
                    name: name.clone(),
                    exists,
                    delete,
                    list,
                    list_names,
                    next_page: raw.next_page.filter(|p| !p.is_empty()),
                    budget: raw.budget,
                    delete_timeout,
                },
            );
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

    /// `a`, `b`, or `none` when there are none: for error messages.
    pub(crate) fn names(&self) -> String {
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

/// The kinds of this process's suite, loaded once.
pub(crate) fn current() -> Result<&'static Kinds, String> {
    static KINDS: std::sync::OnceLock<Result<Kinds, String>> = std::sync::OnceLock::new();
    KINDS
        .get_or_init(|| {
            let config = crate::config::current().map_err(|e| e.to_string())?;
            let path = crate::config::suite_dir()
                .unwrap_or(Path::new("."))
                .join(crate::config::CONFIG_FILE);
            Kinds::from_config(config, &path).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// An HTTP request that failed, sorted by whether retrying can help.
#[derive(Debug, Clone)]
pub(crate) enum OpError {
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

/// What `exists` saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Presence {
    Gone,
    /// Still there; a short description (e.g. its `state`) for logs.
    Present(String),
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

    pub(crate) async fn exists(&self, pod: &Pod, name: &str) -> Result<Presence, OpError> {
        let (status, body) = send(pod, &self.exists, &[("name", name)], "").await?;
        if status == StatusCode::NOT_FOUND {
            Ok(Presence::Gone)
        } else if status.is_success() {
            let state = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| {
                    v.get("state")
                        .and_then(|s| s.as_str())
                        .map(|s| format!("state={s}"))
                });
            Ok(Presence::Present(state.unwrap_or_else(|| {
                format!("{} answered {status}", self.exists)
            })))
        } else {
            Err(classify(&self.exists, status, &body))
        }
    }

    /// Asks for the deletion; `Ok` when the pod accepted it or the resource
    /// was already gone.
    pub(crate) async fn delete(&self, pod: &Pod, name: &str) -> Result<(), OpError> {
        let (status, body) = send(pod, &self.delete, &[("name", name)], "").await?;
        if status.is_success() || status == StatusCode::NOT_FOUND {
            Ok(())
        } else {
            Err(classify(&self.delete, status, &body))
        }
    }

    /// Every name the pod lists under `prefix`, across pages.
    pub(crate) async fn list(&self, pod: &Pod, prefix: &str) -> Result<Vec<String>, OpError> {
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let extra = token
                .as_deref()
                .map(|t| format!("page_token={}", encode(t)))
                .unwrap_or_default();
            let (status, body) = send(pod, &self.list, &[("prefix", prefix)], &extra).await?;
            if !status.is_success() {
                return Err(classify(&self.list, status, &body));
            }
            let json: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
                OpError::Permanent(format!(
                    "{} answered something that is not JSON: {e}",
                    self.list
                ))
            })?;
            let (array, field) = &self.list_names;
            let items = json
                .pointer(array)
                .and_then(|a| a.as_array())
                .ok_or_else(|| {
                    OpError::Permanent(format!(
                        "{} answered JSON without an array at {array:?} (`list_names`)",
                        self.list
                    ))
                })?;
            for item in items {
                match item.pointer(field).and_then(|n| n.as_str()) {
                    Some(n) => names.push(n.to_owned()),
                    None => {
                        return Err(OpError::Permanent(format!(
                            "{} answered an item without a string at {field:?} (`list_names`)",
                            self.list
                        )))
                    }
                }
            }
            token = self
                .next_page
                .as_deref()
                .and_then(|p| json.pointer(p))
                .and_then(|t| t.as_str())
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if token.is_none() {
                return Ok(names);
            }
        }
        Err(OpError::Permanent(format!(
            "{} kept answering with a next page after {MAX_PAGES} pages",
            self.list
        )))
    }
}

fn classify(template: &Template, status: StatusCode, body: &str) -> OpError {
    let mut body = body.trim().to_owned();
    if body.len() > 300 {
        let mut end = 300;
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
        body.push('…');
    }
    let message = format!("{template} answered {status}: {body}");
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        OpError::Transient(message)
    } else {
        OpError::Permanent(message)
    }
}

async fn send(
    pod: &Pod,
    template: &Template,
    values: &[(&str, &str)],
    extra_query: &str,
) -> Result<(StatusCode, String), OpError> {
    let mut path = template.render(values);
    if !extra_query.is_empty() {
        path.push(if path.contains('?') { '&' } else { '?' });
        path.push_str(extra_query);
    }
    let request = pod
        .client()
        .request(template.method.clone(), pod.url(&path))
        .timeout(REQUEST_TIMEOUT);
    let response = request.send().await.map_err(|e| {
        OpError::Transient(format!(
            "{} {path} failed: {}",
            template.method,
            error_chain(&e)
        ))
    })?;
    let status = response.status();
    let body = response.text().await.map_err(|e| {
        OpError::Transient(format!(
            "{} {path}: reading the answer failed: {}",
            template.method,
            error_chain(&e)
        ))
    })?;
    Ok((status, body))
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

/// `METHOD /path?query` with `{placeholders}`.
#[derive(Debug, Clone)]
struct Template {
    method: Method,
    path: String,
}

impl Template {
    fn parse(text: &str) -> Result<Template, String> {
        let (method, path) = text.trim().split_once(' ').ok_or_else(|| {
            format!("is {text:?}: expected `METHOD /path`, e.g. \"GET /api/things/{{name}}\"")
        })?;
        let method = Method::from_bytes(method.as_bytes())
            .map_err(|_| format!("is {text:?}: {method:?} is not an HTTP method"))?;
        let path = path.trim();
        if !path.starts_with('/') {
            return Err(format!("is {text:?}: the path must start with `/`"));
        }
        Ok(Template {
            method,
            path: path.to_owned(),
        })
    }

    fn render(&self, values: &[(&str, &str)]) -> String {
        let mut out = self.path.clone();
        for (key, value) in values {
            out = out.replace(&format!("{{{key}}}"), &encode(value));
        }
        out
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so a
/// value is safe in a path segment and in a query.
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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
        assert_eq!(k.list_names, ("/items".to_owned(), "/name".to_owned()));
        assert_eq!(
            k.exists.render(&[("name", "a b/c")]),
            "/api/sandboxes/a%20b%2Fc"
        );
        assert_eq!(kinds.names(), "`sandbox`");
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
