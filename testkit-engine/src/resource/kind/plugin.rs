//! The plugin API: a resource kind in Rust, for what templates cannot say.

use std::future::Future;
use std::pin::Pin;

use super::{OpError, Presence, ResourceRef};
use crate::pod::Pod;

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
