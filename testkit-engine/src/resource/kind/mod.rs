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
//! delete_timeout = "30s"                      # optional: delete + verify, per resource (1ms to 24h)
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
use std::path::PathBuf;
use std::time::Duration;

use super::names::Naming;

mod http;
pub(crate) use http::error_chain;
mod parse;
mod plugin;
#[cfg(test)]
mod tests;

pub use plugin::{KindFuture, LinkedKinds, ResourceKind};

/// How long deleting and verifying one resource may take, unless the kind
/// says otherwise.
pub(super) const DEFAULT_DELETE_TIMEOUT: Duration = Duration::from_secs(30);

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
    Http(Box<http::Http>),
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

/// A `[resources.<kind>]` table that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid {}: `resources.{kind}{}` {problem}", path.display(), key.as_deref().map(|k| format!(".{k}")).unwrap_or_default())]
pub struct KindError {
    path: PathBuf,
    kind: String,
    key: Option<String>,
    problem: String,
}

impl Kinds {
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
    pub(crate) fn has_ids(&self) -> bool {
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
}
