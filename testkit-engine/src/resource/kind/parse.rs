//! Reading a `[resources.<kind>]` table of `testkit.toml` into a kind.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::http::{GoneIf, Http};
use super::{KindError, KindSpec, Kinds, LinkedKinds, Ops, DEFAULT_DELETE_TIMEOUT};
use crate::config::SuiteConfig;
use crate::resource::names::Naming;
use crate::template::{split_item_pointer as split_pointer, RequestTemplate};

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
    list_body: Option<String>,
    #[serde(default)]
    list_absent_is_empty: bool,
    #[serde(default)]
    list_names: Option<String>,
    #[serde(default)]
    list_names_decode: Option<String>,
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
    crate::resource::names::MAX_NAME_LEN
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
}

/// What is wrong with a kind: the key at fault (dotted below the kind, as
/// `names.max_len`; `None`: the kind as a whole), and why.
type Problem = (Option<String>, String);

fn at(key: &str, problem: impl Into<String>) -> Problem {
    (Some(key.to_owned()), problem.into())
}

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
    let raw = deserialize_raw(value)?;
    if raw.budget == Some(0) {
        return Err(at("budget", "is 0: expected at least 1, or no budget"));
    }
    let delete_timeout = match raw.delete_timeout.as_deref() {
        None => DEFAULT_DELETE_TIMEOUT,
        Some(text) => crate::duration::TIMEOUT
            .parse(text)
            .map_err(|e| at("delete_timeout", format!("is {text:?}: {e}")))?,
    };
    let naming = match &raw.names {
        None => Naming::default(),
        Some(n) => Naming::new(n.separator, n.max_len).map_err(|p| at("names", p.to_string()))?,
    };
    let ops = if raw.rust {
        let http_keys = [
            ("exists", raw.exists.is_some()),
            ("delete", raw.delete.is_some()),
            ("list", raw.list.is_some()),
            ("list_names", raw.list_names.is_some()),
        ];
        if let Some((key, _)) = http_keys.iter().find(|(_, set)| *set) {
            return Err(at(
                key,
                "is set, but `rust = true` says the kind is Rust code: keep one of the two",
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

/// The table as [`RawKind`]; a value of the wrong type names its key
/// (`budget`, `names.max_len`, `gone[1]`), which serde alone does not.
fn deserialize_raw(value: &toml::Value) -> Result<RawKind, Problem> {
    if !value.is_table() {
        return Err((
            None,
            format!(
                "is {value}, not a table: expected the kind's keys (exists, delete, list, \
                 list_names, or `rust = true`) under `[resources.<kind>]`"
            ),
        ));
    }
    serde_path_to_error::deserialize(value.clone()).map_err(|e| {
        let key = e.path().to_string();
        let message = crate::config::serde_problem(e.inner().message());
        let key = (!key.is_empty() && key != ".").then_some(key);
        (key, message)
    })
}

fn parse_http(raw: &RawKind) -> Result<Http, Problem> {
    let (exists, delete, list) = templates(raw)?;
    let (list_names, list_ids) = list_pointers(raw)?;
    check_placeholders(&exists, &delete, list_ids.is_some())?;
    if let Some(p) = raw
        .next_page
        .as_deref()
        .filter(|p| !p.is_empty() && !p.starts_with('/'))
    {
        return Err(at(
            "next_page",
            format!("is {p:?}: expected a JSON pointer, e.g. \"/next_page_token\""),
        ));
    }
    let gone = raw.gone.clone().unwrap_or_else(|| vec![404]);
    if gone.iter().any(|s| !(200..600).contains(s)) {
        return Err(at("gone", format!("is {gone:?}: expected HTTP statuses")));
    }
    if let Some(g) = &raw.gone_if {
        check_gone_if(g)?;
    }
    Ok(Http {
        exists,
        delete,
        list,
        list_names,
        list_ids,
        next_page: raw.next_page.clone().filter(|p| !p.is_empty()),
        list_absent_is_empty: raw.list_absent_is_empty,
        list_names_decode: list_names_decode(raw)?,
        gone,
        gone_if: raw.gone_if.clone(),
    })
}

/// `list_names_decode`: how the listing's names are encoded.
fn list_names_decode(raw: &RawKind) -> Result<Option<super::http::Decode>, Problem> {
    let Some(text) = raw.list_names_decode.as_deref() else {
        return Ok(None);
    };
    super::http::Decode::ALL
        .iter()
        .find(|(name, _)| *name == text)
        .map(|(_, d)| Some(*d))
        .ok_or_else(|| {
            at(
                "list_names_decode",
                format!(
                    "is {text:?}: expected one of {}",
                    super::http::Decode::ALL
                        .iter()
                        .map(|(n, _)| format!("\"{n}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
}

/// `exists`, `delete` and `list`, each required and a request template.
fn templates(
    raw: &RawKind,
) -> Result<(RequestTemplate, RequestTemplate, RequestTemplate), Problem> {
    let template = |key: &str, text: &Option<String>| {
        let text = required(key, text)?;
        RequestTemplate::parse(&text).map_err(|p| at(key, p))
    };
    let exists = template("exists", &raw.exists)?.with_body(raw.exists_body.clone());
    let delete = template("delete", &raw.delete)?.with_body(raw.delete_body.clone());
    let list = template("list", &raw.list)?.with_body(raw.list_body.clone());
    for (key, body) in [
        ("exists_body", &raw.exists_body),
        ("delete_body", &raw.delete_body),
        ("list_body", &raw.list_body),
    ] {
        if let Some(body) = body {
            crate::template::check_filters(body).map_err(|p| at(key, p))?;
        }
    }
    Ok((exists, delete, list))
}

fn required(key: &str, value: &Option<String>) -> Result<String, Problem> {
    value.clone().ok_or_else(|| {
        at(
            key,
            "is missing: a kind is HTTP templates (exists, delete, list, list_names) \
             or `rust = true`",
        )
    })
}

/// A JSON pointer split at its `/*`: the array, and the path in each item.
type ItemPointer = (String, String);

/// `list_names` and `list_ids`, split at their `/*`, over one array.
fn list_pointers(raw: &RawKind) -> Result<(ItemPointer, Option<ItemPointer>), Problem> {
    let list_names_text = required("list_names", &raw.list_names)?;
    let list_names = split_pointer(&list_names_text).ok_or_else(|| {
        at(
            "list_names",
            format!("is {list_names_text:?}: expected a JSON pointer with one `/*` over an array, e.g. \"/items/*/name\""),
        )
    })?;
    let list_ids = match &raw.list_ids {
        None => None,
        Some(text) => Some(split_pointer(text).ok_or_else(|| {
            at(
                "list_ids",
                format!("is {text:?}: expected a JSON pointer with one `/*` over an array, e.g. \"/items/*/id\""),
            )
        })?),
    };
    if let Some(ids) = &list_ids {
        if ids.0 != list_names.0 {
            return Err(at(
                "list_ids",
                format!(
                    "points into {:?}, but `list_names` into {:?}: both must read the same array",
                    ids.0, list_names.0
                ),
            ));
        }
    }
    Ok((list_names, list_ids))
}

/// `exists` and `delete` name the resource. (A `list` without `{prefix}`
/// or `{run}` lists everything, and testkit keeps what carries the run's
/// prefix: see `KindSpec::list`.)
fn check_placeholders(
    exists: &RequestTemplate,
    delete: &RequestTemplate,
    has_ids: bool,
) -> Result<(), Problem> {
    for (key, t) in [("exists", exists), ("delete", delete)] {
        if !t.uses("name") && !t.uses("id") {
            return Err(at(
                key,
                format!(
                    "is {:?}: expected a `{{name}}` or `{{id}}` placeholder",
                    t.to_string()
                ),
            ));
        }
        if t.uses("id") && !has_ids {
            return Err(at(
                key,
                "uses `{id}`: then `list_ids` must say where a listing holds the ids, \
                 so that a resource whose creation was never answered can still be found",
            ));
        }
    }
    Ok(())
}

fn check_gone_if(g: &GoneIf) -> Result<(), Problem> {
    if !g.pointer.starts_with('/') {
        return Err(at(
            "gone_if",
            format!(
                "has pointer {:?}: expected a JSON pointer, e.g. \"/state\"",
                g.pointer
            ),
        ));
    }
    for value in &g.equals {
        crate::template::check_filters(value).map_err(|p| at("gone_if", p))?;
    }
    if g.equals.is_empty() != g.missing {
        return Err(at(
            "gone_if",
            "must say `equals = [\"deleted\", …]` or `missing = true`, not both",
        ));
    }
    Ok(())
}
