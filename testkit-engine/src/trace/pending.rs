//! What the process is waiting on right now: the requests in flight and
//! the waits pending, each since when, a wait with what it last saw. A
//! test that times out (or a test process asked with `SIGUSR1`) says them
//! in its failure, so that a hang names what hung: the request to a
//! frozen node, the wait that saw the same state for a minute.
//!
//! Registered whether or not a trace is kept, and dropped with the guard
//! [`begin_request`] and [`begin_wait`] return, however the step ends
//! (answered, failed, cancelled by a timeout).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One thing the process waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pending {
    /// A request sent, not yet answered.
    Request {
        /// Its method.
        method: String,
        /// Its URL, credentials never in it (they go in headers).
        url: String,
        /// How long it has been in flight.
        elapsed: Duration,
    },
    /// A wait (`testkit::wait::until`) that has not ended.
    Wait {
        /// What it waits for.
        what: String,
        /// What its last poll observed, if one did.
        last_seen: Option<String>,
        /// How long it has waited.
        elapsed: Duration,
    },
}

impl std::fmt::Display for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |d: &Duration| format!("{:.1}s", d.as_secs_f64());
        match self {
            Pending::Request {
                method,
                url,
                elapsed,
            } => write!(f, "request in flight: {method} {url} for {}", secs(elapsed)),
            Pending::Wait {
                what,
                last_seen,
                elapsed,
            } => {
                write!(f, "waiting for {what} for {}", secs(elapsed))?;
                match last_seen {
                    Some(seen) => write!(f, "; last saw: {seen}"),
                    None => write!(f, "; no poll has answered yet"),
                }
            }
        }
    }
}

enum Kind {
    Request {
        method: String,
        url: String,
    },
    Wait {
        what: String,
        last_seen: Option<String>,
    },
}

struct Entry {
    id: u64,
    /// The trace of the test it belongs to ([`super::Recorder::id`]),
    /// when one is known: under `cargo test` several tests share the
    /// process.
    owner: Option<u64>,
    since: Instant,
    kind: Kind,
}

static PENDING: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

fn pending() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held while a step is pending; dropping it ends the step.
#[derive(Debug)]
#[must_use = "the step is pending only while the guard lives"]
pub struct PendingGuard {
    id: u64,
}

impl PendingGuard {
    fn begin(kind: Kind) -> PendingGuard {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let owner = super::active::current().map(|r| r.id());
        pending().push(Entry {
            id,
            owner,
            since: Instant::now(),
            kind,
        });
        PendingGuard { id }
    }

    /// A wait's latest observation.
    pub fn saw(&self, observation: &str) {
        if let Some(Entry {
            kind: Kind::Wait { last_seen, .. },
            ..
        }) = pending().iter_mut().find(|e| e.id == self.id)
        {
            *last_seen = Some(crate::trace::cap(observation));
        }
    }
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        pending().retain(|e| e.id != self.id);
    }
}

/// A request sent to `url`, pending until the guard is dropped.
pub fn begin_request(method: &str, url: &str) -> PendingGuard {
    PendingGuard::begin(Kind::Request {
        method: method.to_owned(),
        url: crate::redact::redact_url(url),
    })
}

/// A wait for `what`, pending until the guard is dropped.
pub fn begin_wait(what: &str) -> PendingGuard {
    PendingGuard::begin(Kind::Wait {
        what: crate::trace::cap(what),
        last_seen: None,
    })
}

/// Everything pending now, oldest first: of the test whose trace is
/// `owner` (and what no trace claims), or of every test when `None`.
pub fn now(owner: Option<u64>) -> Vec<Pending> {
    let at = Instant::now();
    pending()
        .iter()
        .filter(|e| owner.is_none() || e.owner.is_none() || e.owner == owner)
        .map(|e| {
            let elapsed = at.saturating_duration_since(e.since);
            match &e.kind {
                Kind::Request { method, url } => Pending::Request {
                    method: method.clone(),
                    url: url.clone(),
                    elapsed,
                },
                Kind::Wait { what, last_seen } => Pending::Wait {
                    what: what.clone(),
                    last_seen: last_seen.as_ref().map(|s| crate::redact(s).into_owned()),
                    elapsed,
                },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_pending_while_its_guard_lives() {
        let request = begin_request("GET", "http://127.0.0.1:1/api/x");
        let wait = begin_wait("sandbox a to be ready");
        wait.saw("state=starting");
        let said: Vec<String> = now(None).iter().map(ToString::to_string).collect();
        assert!(
            said.iter()
                .any(|s| s.starts_with("request in flight: GET http://127.0.0.1:1/api/x for ")),
            "{said:?}"
        );
        assert!(
            said.iter()
                .any(|s| s.starts_with("waiting for sandbox a to be ready for ")
                    && s.ends_with("; last saw: state=starting")),
            "{said:?}"
        );
        drop(request);
        drop(wait);
        assert!(!now(None)
            .iter()
            .any(|p| matches!(p, Pending::Request { url, .. } if url.ends_with("/api/x"))));
    }
}
