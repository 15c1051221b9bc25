//! The pod against the real `sandboxd`: handle validation, boot and
//! teardown, session hand-off across processes, skips, and redaction.

#[path = "pod/support.rs"]
mod support;

#[path = "pod/auth.rs"]
mod auth;
#[path = "pod/handle.rs"]
mod handle;
#[path = "pod/lifecycle.rs"]
mod lifecycle;
#[path = "pod/session.rs"]
mod session;
